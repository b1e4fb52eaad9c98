from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from accelbench import workloads
from accelbench.cell.environment import capture
from accelbench.errors import AccelbenchError
from accelbench.orchestration import launch
from accelbench.scenarios.train import measure as train
from accelbench.workload import Tokens

from .conftest import tiny

# One step of the largest models at their full depth, length or resolution takes minutes on a
# 2-core CPU, so the step test runs their same code at a smaller size; their full size is
# checked by parameter count below, on the meta device.
SMALLER: dict[str, dict[str, int | float]] = {
    "gpt2_small": {"num_layers": 1, "seq_len": 128},
    "gpt2_medium": {"num_layers": 1, "seq_len": 128},
    "gpt2_large": {"num_layers": 1, "seq_len": 128},
    "bert_large_squad": {"num_layers": 2},
    "bert_large_pretrain_sl128": {"num_layers": 2},
    "bert_base_pretrain_sl512": {"num_layers": 2},
    "bert_large_pretrain_sl512": {"num_layers": 2},
    "unet_medical": {"image_size": 128},
    "efficientdet_d0": {"image_size": 256},
    "efficientdet_d4": {"image_size": 256},
    "bert_base_squad": {"num_layers": 2},
    "bert_base_pretrain_sl128": {"num_layers": 2},
    "resnet50": {"image_size": 64},
    "resnext101_32x4d": {"image_size": 64},
    "efficientnet_b0": {"image_size": 64},
    "efficientnet_b4": {"image_size": 64},
    "vit_base_16": {"image_size": 64},
    "vit_base_16_finetune": {"image_size": 64},
    "swin_tiny": {"image_size": 64},
    "swin_base": {"image_size": 64},
    "swin_large": {"image_size": 64},
    "conformer_medium": {"seconds": 1.0},
}
# The Llama shapes hold a 128k-token vocabulary: even one layer of them is gigabytes of weights
# and optimizer state. llama3_tiny runs the same code (LlamaConfig); their full shapes are
# checked by parameter count below.
# So do the mixtures of experts' (21B and 47B weights: 84 GB in fp32); moe_tiny runs their code.
TOO_LARGE_FOR_A_STEP = {"llama3_2_1b", "llama3_2_3b", "llama3_1_8b", "llama3_1_70b", "llama2_70b"}
TOO_LARGE_FOR_A_STEP |= {"gpt_oss_20b", "gpt_oss_120b", "mixtral_8x7b"}
# torch_geometric replaces torch.index_select for the whole process, which breaks effdet's
# TorchScript; accelbench runs every cell in a process of its own, and so does this test.
OWN_PROCESS = {"gin"}


@pytest.mark.parametrize("name", sorted(workloads.WORKLOADS.keys() - TOO_LARGE_FOR_A_STEP))
def test_every_workload_trains_one_step(name: str) -> None:
    spec = tiny(
        workload=name, batch_size=1, epochs=1, steps_per_epoch=1, model_args=SMALLER.get(name, {})
    )
    if name in OWN_PROCESS:
        result = launch.run_in_child(spec, capture("cpu"), timeout_s=300)
        assert result.status == "ok", result.reason
        metrics = result.metrics
    else:
        metrics = train.measure(spec, workloads.get(name, spec.model_args), torch.device("cpu"))
    assert metrics is not None
    assert len(metrics.step_ms) == 1
    assert metrics.step_ms[0] > 0
    assert metrics.diverged_at_step is None
    assert metrics.items_per_step == 1
    assert workloads.describe(name)


@pytest.mark.parametrize(
    ("name", "published"),
    [
        # Hugging Face model cards of gpt2, gpt2-medium, gpt2-large (tied input/output embeddings).
        ("gpt2_small", 124.4e6),
        ("gpt2_medium", 354.8e6),
        ("gpt2_large", 774.0e6),
        # BERT paper (Devlin et al. 2019): Base 110M, Large 340M (encoder and embeddings).
        ("bert_base_pretrain_sl128", 110e6),
        ("bert_large_pretrain_sl512", 340e6),
        # timm's model cards: Swin-B 87.8M, Swin-L 196.5M; ViT-B/16 at 384: 86.9M.
        ("swin_base", 87.8e6),
        ("swin_large", 196.5e6),
        ("vit_base_16_finetune", 86.9e6),
        # EfficientDet paper (Tan et al. 2020), Table 2: D0 3.9M, D4 20.7M.
        ("efficientdet_d0", 3.9e6),
        ("efficientdet_d4", 20.7e6),
        # Meta's model cards: Llama 3.2 1B 1.23B, 3B 3.21B; Llama 3.1 8B 8.03B, 70B 70.6B.
        ("llama3_2_1b", 1.23e9),
        ("llama3_2_3b", 3.21e9),
        ("llama3_1_8b", 8.03e9),
        ("llama3_1_70b", 70.6e9),
        # Meta's Llama 2 paper (Touvron et al. 2023): 70B; transformers counts 68.98B.
        ("llama2_70b", 68.98e9),
        # Mistral AI's Mixtral 8x7B announcement: 46.7B; OpenAI's gpt-oss model card: 21B
        # (20.9B counted by transformers), test_llm checks its 3.6B active.
        ("mixtral_8x7b", 46.7e9),
        ("gpt_oss_20b", 20.9e9),
        # OpenAI's gpt-oss model card: 117B (116.83B), 5.1B active.
        ("gpt_oss_120b", 116.83e9),
    ],
)
def test_full_size_models_have_the_published_parameter_count(name: str, published: float) -> None:
    with torch.device("meta"):
        model = workloads.get(name).build_model()
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(published, rel=0.03)


def test_autoencoder_has_the_published_parameter_count() -> None:
    model = workloads.get("autoencoder").build_model()
    count = sum(p.numel() for p in model.parameters())
    assert abs(count - 8_922_155) / 8_922_155 < 1e-3  # seed 000: "Total params: 8,922,155"
    image = torch.rand(3, 1, 28, 28)
    assert model(image).shape == image.shape


def test_resnet50_is_the_imagenet_shape() -> None:
    w = workloads.get("resnet50")
    sample = w.make_sample(torch.Generator().manual_seed(0))
    assert sample["image"].shape == (3, 224, 224)
    model = w.build_model()
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(25.6e6, rel=0.01)


@pytest.mark.parametrize(
    ("name", "seq_len"),
    [
        ("bert_base_squad", 384),
        ("bert_base_pretrain_sl128", 128),
        ("bert_large_pretrain_sl512", 512),
        ("gpt2_small", 1024),
    ],
)
def test_language_workloads_have_the_seeds_sequence_length(name: str, seq_len: int) -> None:
    w = workloads.get(name)
    assert isinstance(w.reads, Tokens) and w.reads.seq_len == seq_len
    assert w.make_sample(torch.Generator().manual_seed(0))["input_ids"].shape == (seq_len,)


def test_masked_lm_labels_only_the_masked_positions() -> None:
    sample = workloads.get("bert_base_pretrain_sl512").make_sample(torch.Generator().manual_seed(0))
    masked = sample["labels"] != -100
    assert 0.10 < masked.float().mean() < 0.20  # BERT masks 15%
    assert (sample["input_ids"][masked] == 103).all()
    assert (sample["input_ids"][~masked] != 103).any()


def test_model_args_change_the_shape() -> None:
    sample = workloads.get("resnet50", {"image_size": 160}).make_sample(torch.Generator())
    assert sample["image"].shape == (3, 160, 160)


def test_unknown_model_arg_lists_the_accepted_ones() -> None:
    with pytest.raises(
        AccelbenchError,
        match="resnet50 takes no model arg 'img_sz'; it takes: image_size, num_classes",
    ):
        workloads.check("resnet50", {"img_sz": 160})


def test_any_timm_model_by_name() -> None:
    workloads.check("timm/resnet18", {})
    w = workloads.get("timm/resnet18", {"image_size": 64, "num_classes": 5})
    model = w.build_model()
    batch = {k: torch.stack([v, v]) for k, v in w.make_sample(torch.Generator()).items()}
    assert model(batch["image"]).shape == (2, 5)
    with pytest.raises(AccelbenchError, match="did you mean timm/resnet18"):
        workloads.check("timm/resnet18x", {})


def test_any_transformers_type_with_config_overrides() -> None:
    args = {
        "seq_len": 32,
        "num_hidden_layers": 1,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
    }
    workloads.check("hf/bert", args)
    w = workloads.get("hf/bert", args)
    model = w.build_model()
    assert type(model).__name__ == "BertForMaskedLM"
    assert model.config.num_hidden_layers == 1  # type: ignore[union-attr]
    batch = {k: torch.stack([v, v]) for k, v in w.make_sample(torch.Generator()).items()}
    assert torch.isfinite(w.loss(model, batch))


def test_transformers_config_typos_are_refused() -> None:
    with pytest.raises(
        AccelbenchError, match="'n_layers' is not a field of the gpt2 config: did you mean n_layer"
    ):
        workloads.check("hf/gpt2", {"n_layers": 2})
    with pytest.raises(AccelbenchError, match="did you mean hf/gpt2"):
        workloads.check("hf/gtp2", {})
    with pytest.raises(AccelbenchError, match="at most 1024 positions"):
        workloads.get("hf/gpt2", {"seq_len": 2048})
    with pytest.raises(AccelbenchError, match="at most 1024 positions"):
        workloads.check("hf/gpt2", {"seq_len": 2048})  # before any cell runs
    workloads.check("hf/gpt2", {"seq_len": 2048, "n_positions": 2048})


@pytest.mark.parametrize(
    "name", ["autoencodr", "timm/", "hf/a/b", "models/net.txt:build", "model.py:"]
)
def test_malformed_names_are_refused(name: str) -> None:
    with pytest.raises(AccelbenchError, match="unknown workload"):
        workloads.check_name(name)


def test_unknown_workload_suggests_a_name() -> None:
    with pytest.raises(AccelbenchError, match="did you mean autoencoder"):
        workloads.get("autoencodr")


def test_user_model_from_a_file(tmp_path: Path) -> None:
    example = Path(__file__).parents[1] / "examples" / "my_model.py"
    w = workloads.get(f"{example}:build", {"width": 8})
    metrics = train.measure(
        tiny(workload=f"{example}:build", model_args={"width": 8}), w, torch.device("cpu")
    )
    assert metrics.item_unit == "images"
    assert all(t > 0 for t in metrics.step_ms)


def test_user_model_that_returns_something_else(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("def build():\n    return 42\n")
    with pytest.raises(AccelbenchError, match=r"must return an accelbench\.Workload"):
        workloads.get(f"{path}:build")
    with pytest.raises(AccelbenchError, match="has no function 'nope'"):
        workloads.get(f"{path}:nope")
    with pytest.raises(AccelbenchError, match="no model file"):
        workloads.check(f"{tmp_path / 'missing.py'}:build", {})
    with pytest.raises(AccelbenchError, match="no module"):
        workloads.check("no_such_package.models:build", {})


def test_listing_does_not_import_torch() -> None:
    code = "import sys, accelbench.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_user_function_is_looked_for_in_the_source_without_running_it(tmp_path: Path) -> None:
    from accelbench.workloads import _may_define

    cases = {
        "def other(): pass\nprint('not run')\n": False,
        "import sys\nif sys.version_info > (3,):\n    def build(): pass\n": True,
        "from helpers import build\n": True,
        "from helpers import *\n": True,  # cannot tell: allowed
        "def make(): pass\nglobals()['build'] = make\n": True,  # made by name at run time
        "def __getattr__(name): pass\n": True,
    }
    for i, (source, defined) in enumerate(cases.items()):
        path = tmp_path / f"m{i}.py"
        path.write_text(source)
        assert _may_define(path, "build") is defined, source
    with pytest.raises(AccelbenchError, match="defines no 'build'"):
        workloads.check(f"{tmp_path / 'm0.py'}:build", {})
