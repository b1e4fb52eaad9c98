from __future__ import annotations

import io
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from accelbench import workloads
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.execution.data import DIGITS, check_fits, check_readable, data_format, make_loader
from accelbench.scenarios.train import measure as train
from accelbench.workload import Arrays, Batch, Tokens, reading

from ..conftest import make_image_folder, make_mnist, make_shards, make_tokens, tiny

EXAMPLE = str(Path(__file__).parents[2] / "examples" / "my_model.py") + ":build"
TINY_GPT2 = {"seq_len": 16, "n_layer": 1, "n_embd": 32, "n_head": 2}


def test_formats_are_told_apart(tmp_path: Path) -> None:
    shards = make_shards(tmp_path / "shards")
    assert data_format(str(make_image_folder(tmp_path / "folder"))) == "imagefolder"
    assert data_format(str(shards)) == "webdataset"
    assert data_format(str(shards / "shard-000.tar")) == "webdataset"
    assert data_format(str(shards / "shard-{000..001}.tar")) == "webdataset"
    assert data_format(str(make_mnist(tmp_path / "mnist"))) == "mnist"
    assert data_format(str(make_tokens(tmp_path / "ids.npy"))) == "tokens"


def test_missing_or_unknown_data_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AccelbenchError, match="no data at"):
        data_format(str(tmp_path / "nothing"))
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(AccelbenchError, match="cannot tell the format"):
        data_format(str(tmp_path / "notes.txt"))


def test_a_workload_only_reads_its_kind_of_data(tmp_path: Path) -> None:
    tokens, folder = str(make_tokens(tmp_path / "ids.npy")), str(make_image_folder(tmp_path / "f"))
    with pytest.raises(AccelbenchError, match=r"resnet50 reads images, but .* holds tokens"):
        check_fits(tokens, workloads.get("resnet50").reads, "resnet50")
    with pytest.raises(AccelbenchError, match="gpt2_small reads tokens"):
        check_fits(folder, workloads.get("gpt2_small").reads, "gpt2_small")
    with pytest.raises(AccelbenchError, match="lstm trains on synthetic data only"):
        check_fits(folder, workloads.get("lstm").reads, "lstm")


@pytest.mark.parametrize("workers", [0, 2])
def test_image_folder_trains_with_the_imagenet_pipeline(tmp_path: Path, workers: int) -> None:
    folder = str(make_image_folder(tmp_path / "folder"))
    spec = tiny(workload=EXAMPLE, data=folder, workers=workers, batch_size=4)
    workload = workloads.get(EXAMPLE)
    batch = next(iter(make_loader(workload, spec, pin_memory=False)))
    assert batch["image"].shape == (4, 3, 32, 32)
    assert batch["image"].mean().abs() < 1.5  # normalised, not raw [0, 255] pixels
    assert set(batch["label"].tolist()) <= {0, 1}
    metrics = train.measure(spec, workload, torch.device("cpu"))
    assert metrics.input_wait_frac is not None and 0 <= metrics.input_wait_frac <= 1
    assert len(metrics.input_wait_ms) == len(metrics.step_ms)


def test_webdataset_shards_stream_without_end(tmp_path: Path) -> None:
    shards = str(make_shards(tmp_path / "shards", num_shards=2, per_shard=3))
    spec = tiny(workload=EXAMPLE, data=shards, batch_size=4, steps_per_epoch=5)  # 40 > 6 images
    metrics = train.measure(spec, workloads.get(EXAMPLE), torch.device("cpu"))
    assert len(metrics.step_ms) == 10
    assert metrics.input_wait_frac is not None


def test_mnist_idx_feeds_the_autoencoder(tmp_path: Path) -> None:
    images = str(make_mnist(tmp_path / "mnist"))
    workload = workloads.get("autoencoder")
    batch = next(
        iter(make_loader(workload, tiny(workload="autoencoder", data=images), pin_memory=False))
    )
    assert batch["image"].shape == (4, 1, 28, 28)
    assert batch["image"].min() >= 0 and batch["image"].max() <= 1
    assert batch["label"].max() < 10


def test_token_file_feeds_a_language_model(tmp_path: Path) -> None:
    ids = make_tokens(tmp_path / "ids.npy")
    spec = tiny(workload="hf/gpt2", model_args=TINY_GPT2, data=str(ids))
    workload = workloads.get("hf/gpt2", TINY_GPT2)
    batch = next(iter(make_loader(workload, spec, pin_memory=False)))
    windows = np.load(ids).reshape(-1, 16)
    assert any((batch["input_ids"][0].numpy() == w).all() for w in windows)  # consecutive ids
    assert train.measure(spec, workload, torch.device("cpu")).diverged_at_step is None


def test_data_the_model_cannot_take_is_refused(tmp_path: Path) -> None:
    folder = str(make_image_folder(tmp_path / "folder", num_classes=3))
    narrow = tiny(workload=EXAMPLE, data=folder, model_args={"num_classes": 2})
    with pytest.raises(
        AccelbenchError, match="has 3 classes and the model 2: add --model-arg num_classes=3"
    ):
        make_loader(workloads.get(EXAMPLE, {"num_classes": 2}), narrow, pin_memory=False)
    ids = str(make_tokens(tmp_path / "ids.npy", vocab=60_000))
    with pytest.raises(AccelbenchError, match="beyond the model's vocabulary of 50257"):
        make_loader(
            workloads.get("hf/gpt2", TINY_GPT2),
            tiny(workload="hf/gpt2", data=ids),
            pin_memory=False,
        )


def test_input_wait_shows_a_slow_input_pipeline(tmp_path: Path) -> None:
    def slow(record: Batch, gen: torch.Generator) -> Batch:
        time.sleep(0.01)  # 10 ms per item: far slower than the model's step
        return record

    def build() -> torch.nn.Module:
        return torch.nn.Embedding(100, 4)

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(batch["input_ids"]).pow(2).mean()

    workload = reading(Tokens(8, 100), build, loss, "sequences", prepare=slow)
    spec = tiny(workload="tiny_mlp", data=str(make_tokens(tmp_path / "ids.npy", vocab=100)))
    metrics = train.measure(spec, workload, torch.device("cpu"))
    assert metrics.input_wait_frac is not None and metrics.input_wait_frac > 0.8
    assert metrics.compute_items_per_s is not None
    assert metrics.compute_items_per_s > 3 * metrics.items_per_s


def test_malformed_data_is_refused_before_any_cell(tmp_path: Path) -> None:
    import random
    import tarfile

    (tmp_path / "empty" / "class0").mkdir(parents=True)
    (tmp_path / "corrupt" / "class0").mkdir(parents=True)
    (tmp_path / "corrupt" / "class0" / "a.jpg").write_bytes(b"not a jpeg" * 10)
    (tmp_path / "random.tar").write_bytes(random.Random(0).randbytes(3000))
    (tmp_path / "zero.npy").write_bytes(b"")
    np.save(tmp_path / "float.npy", np.random.default_rng(0).random(5000))
    np.save(tmp_path / "negative.npy", -np.ones(5000, dtype=np.int64))
    (tmp_path / "x-idx3-ubyte").write_bytes(b"")
    with tarfile.open(tmp_path / "plain.tar", "w") as tar:
        info = tarfile.TarInfo("readme.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    cases = {
        "empty": ("resnet50", "Found no valid file"),
        "corrupt": ("resnet50", "cannot identify image file"),
        "random.tar": ("resnet50", "ReadError"),  # tarfile's words vary with the bytes
        "plain.tar": ("resnet50", "didn't find"),
        "zero.npy": ("gpt2_small", "No data left in file"),
        "float.npy": ("gpt2_small", "integer token ids, not float64"),
        "negative.npy": ("gpt2_small", "token id -1"),
        "x-idx3-ubyte": ("lenet5", "cannot read --data"),
    }
    for name, (workload, message) in cases.items():
        with pytest.raises(AccelbenchError, match=re.escape(message)):
            check_readable(str(tmp_path / name), workloads.get(workload), workload)
    db = tmp_path / "r.sqlite"
    out = CliRunner().invoke(
        app, ["run", "resnet50", "--data", str(tmp_path / "corrupt"), "--db", str(db)]
    )
    assert out.exit_code == 2 and "cannot identify image file" in out.output
    assert not db.exists()  # refused before the database was opened


def test_arrays_are_read_row_by_row_and_misshapen_ones_refused(tmp_path: Path) -> None:
    reads = Arrays(features=(3, 2), targets=(1,))
    workload = reading(reads, lambda: torch.nn.Linear(2, 1), lambda m, b: b["target"].sum(), "rows")
    good = tmp_path / "good"
    good.mkdir()
    np.save(good / "features.npy", np.arange(60, dtype=np.float64).reshape(10, 3, 2))
    np.save(good / "targets.npy", np.arange(10, dtype=np.int16).reshape(10, 1))
    assert data_format(str(good)) == "arrays"
    check_readable(str(good), workload, "rows")
    loader = make_loader(workload, tiny(data=str(good), batch_size=10, steps_per_epoch=1), False)
    batch = next(iter(loader))
    assert batch["features"].dtype == torch.float32 and batch["features"].shape == (10, 3, 2)
    # Each target comes with its own row of features: sampling keeps pairs together.
    assert torch.equal(batch["features"][:, 0, 0], batch["target"][:, 0] * 6)
    cases = {
        "wide": (
            (10, 3, 3),
            (10, 1),
            "holds float64 (10, 3, 3); the workload reads numbers of shape (records, 3, 2)",
        ),
        "short": ((10, 3, 2), (9, 1), "10 rows of features and 9 of targets"),
    }
    for name, (features, targets, message) in cases.items():
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "features.npy", np.zeros(features))
        np.save(tmp_path / name / "targets.npy", np.zeros(targets))
        with pytest.raises(AccelbenchError, match=re.escape(message)):
            check_readable(str(tmp_path / name), workload, "rows")
    (tmp_path / "text").mkdir()
    np.save(tmp_path / "text" / "features.npy", np.full((10, 3, 2), "a"))
    with pytest.raises(AccelbenchError, match="holds <U1"):
        check_readable(str(tmp_path / "text"), workload, "rows")
    with pytest.raises(AccelbenchError, match=r"rows reads arrays, but .* holds images"):
        check_fits(DIGITS, reads, "rows")


def test_a_data_path_the_file_system_cannot_hold_is_one_line() -> None:
    with pytest.raises(AccelbenchError, match="--data: File name too long: give an existing one"):
        data_format("x" * 300)


def test_a_data_set_whose_module_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from accelbench.execution import data

    def no_torchvision(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'torchvision'", name="torchvision")

    monkeypatch.setattr(data, "_real_dataset", no_torchvision)
    with pytest.raises(AccelbenchError, match=re.escape("pip install 'accelbench[vision]'")):
        check_readable(DIGITS, workloads.get("lenet5"), "lenet5")
