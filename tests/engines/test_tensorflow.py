"""TensorFlow (Keras 3) as a third engine behind the seam: the same models as torch's (trainable
parameters), cells measured and stored as torch's are, refusals in one line."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import engines
from accelbench.cli import app
from accelbench.report.database import ResultStore

from ..conftest import quick

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("the [tensorflow] extra is not installed", allow_module_level=True)

QUICK = quick(6)

MODELS = """
import json, os
import torch._dynamo  # before TensorFlow, as the engine does: timm's imports reach Triton
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
from accelbench import workloads
from accelbench.engines.tensorflow import models
found = {}
for name, model in models.MODELS.items():
    built = workloads.get(name).build_model()
    found[name] = [models.trainable(model.build()), sum(p.numel() for p in built.parameters())]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def counted() -> dict[str, list[int]]:
    """Each model's trainable parameters under Keras and torch, counted in a process of its own
    (TensorFlow starts threads, and the suite's processes fork cells after this)."""
    done = subprocess.run([sys.executable, "-c", MODELS], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, list[int]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.parametrize("name", ["tiny_mlp", "lenet5", "autoencoder", "resnet50"])
def test_each_keras_model_has_the_torch_models_parameters(
    counted: dict[str, list[int]], name: str
) -> None:
    keras_count, torch_count = counted[name]
    assert keras_count == torch_count


def test_the_engine_offers_the_workloads_it_has_models_of(counted: dict[str, list[int]]) -> None:
    assert set(engines.get("tensorflow").workloads) == set(counted)


def test_tensorflow_cells_train_and_infer_and_are_stored_as_torchs(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "lenet5", "--framework", "tensorflow", "--batch-size", "4", *QUICK]
    done = CliRunner().invoke(app, [*args, "--db", str(db)])
    assert done.exit_code == 0, done.output
    (ours,) = ResultStore(db).query()
    assert ours.status == "ok" and ours.metrics is not None, ours.reason
    m = ours.metrics
    steady = [e for e in m.epochs if e.index > m.steady_from_step // 6]
    assert m.delivered.num_items == sum(e.num_items for e in steady)
    assert m.items_per_s == pytest.approx(m.delivered.num_items / m.delivered.time_s)
    assert len(m.step_ms) == len(m.loss) == 12 and m.flops is None
    assert m.trainable_params == 61_706  # torch's LeNet-5's
    versions = ours.env.versions
    assert (versions.get("tensorflow") or versions.get("tensorflow-cpu")) and versions.get("keras")
    assert not any(name.startswith("TF_VAR") for name in ours.env.env_vars)
    assert "lenet5 bs=4 tensorflow fp32" in done.stdout
    inferred = ["run", "lenet5", "--framework", "tensorflow", "--scenario", "infer"]
    done = CliRunner().invoke(app, [*inferred, "--batch-size", "4", *QUICK, "--db", str(db)])
    assert done.exit_code == 0, done.output
    (answered,) = [r for r in ResultStore(db).query() if r.spec.scenario == "infer"]
    assert answered.status == "ok" and answered.metrics is not None, answered.reason
    assert len(answered.metrics.step_ms) == 12 and answered.metrics.step_ms_steady.n > 0


IN_SYNC = """
import os
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras, numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from accelbench.engines.tensorflow import models
from accelbench.engines.tensorflow.train import training_step
chosen = models.get("tiny_mlp", {})
x, y = chosen.sample(np.random.default_rng(0), 8)
def stepped():
    keras.utils.set_random_seed(0)
    with tf.distribute.get_strategy().scope():
        model, optimizer = chosen.build(), keras.optimizers.SGD(0.1, momentum=0.9)
        step = training_step(tf, model, chosen.loss(), optimizer)
        losses = [float(step(x, y)) for _ in range(3)]
    return losses, [w.numpy() for w in model.trainable_weights]
alone = stepped()
tf.distribute.experimental_set_strategy(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
together = stepped()
assert np.allclose(alone[0], together[0], rtol=1e-5), (alone[0], together[0])
assert all(np.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(alone[1], together[1]))
print("same")
"""


def test_replicas_in_sync_step_as_one_process_does() -> None:
    # Two replicas (two logical CPUs, the multi-worker strategy's step and reduction) given the
    # same batch lose and move exactly as one process: the loss is not counted twice, and the
    # optimizer applies the replicas' summed shares once (checked: dividing the loss by the
    # replicas again, or not summing, moves them apart).
    done = subprocess.run([sys.executable, "-c", IN_SYNC], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]


def test_replicas_train_as_tensorflow_workers(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "tiny_mlp", "--framework", "tensorflow", "--replicas", "2", "--batch-size", "4"]
    done = CliRunner().invoke(app, [*args, *QUICK, "--db", str(db)])
    assert done.exit_code == 0, done.output
    (result,) = ResultStore(db).query()
    m = result.metrics
    assert result.status == "ok" and m is not None, result.reason
    assert [r.rank for r in m.ranks] == [0, 1]  # each worker's own record, gathered
    assert m.epochs[-1].num_items == 6 * 4 * 2  # a step is the global batch of both workers
    assert m.epochs[-1].loss_mean is not None and math.isfinite(m.epochs[-1].loss_mean)


def test_a_cpus_losses_are_read_as_its_steps_end_and_a_gpus_kept_until_read() -> None:
    # A CPU has run the step when it returns: its loss tensor, held until the epochs end,
    # would cost 1 KB of host memory a step. A GPU's step is queued, its loss read later.
    import weakref

    from accelbench.engines.tensorflow.train import Losses, TensorFlowDevice

    class Loss:
        def __init__(self, value: float) -> None:
            self.value = value

        def __float__(self) -> float:
            return self.value

    made: list[weakref.ref[Loss]] = []

    def step(x: float, y: float) -> Loss:
        made.append(weakref.ref(loss := Loss(x * y)))
        return loss

    for device, kept in [("cpu", False), ("cuda", True)]:
        made.clear()
        losses = Losses(step, TensorFlowDevice(device))
        for x in range(3):
            losses.step((x, 2.0))
        assert [ref() is not None for ref in made] == [kept] * 3, device
        assert losses.read() == [0.0, 2.0, 4.0] and losses.read() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lenet5", "--framework", "tensorflow", "--scenario", "generate"], "time-to-train, not"),
        (["lenet5", "--framework", "tensorflow", "--fsdp"], "runs data-parallel replicas only"),
        (["lenet5", "--framework", "tensorflow", "--workers", "2"], "leave out --workers"),
        (["lenet5", "--framework", "tensorflow", "--precision", "bf16"], "not bf16"),
        (["lenet5", "--framework", "tensorflow", "--channels-last"], "--channels-last"),
        (
            ["efficientnet_b0", "--framework", "tensorflow"],
            "autoencoder, resnet50 and user models, not",
        ),
    ],
)
def test_a_cell_tensorflow_cannot_run_is_refused_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = CliRunner().invoke(app, ["run", *args, "--db", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_keras_trains_and_infers_the_autoencoder_on_the_torch_workloads_records(
    tmp_path: Path,
) -> None:
    """--data: the records torch's cell reads, channels last, the images their own targets."""
    db = tmp_path / "r.sqlite"
    args = ["run", "autoencoder", "--framework", "tensorflow", "--data", "sklearn:digits"]
    for scenario in ("train", "infer"):
        more = ["--scenario", scenario, "--batch-size", "4", *QUICK, "--db", str(db)]
        done = CliRunner().invoke(app, [*args, *more])
        assert done.exit_code == 0, done.output
    found = {r.spec.scenario: r for r in ResultStore(db).query()}
    for result in found.values():
        m = result.metrics
        assert result.status == "ok" and m is not None, result.reason
        assert result.spec.data == "sklearn:digits" and len(m.step_ms) == 12
    trained = found["train"].metrics
    assert trained is not None and trained.epochs[-1].loss_mean is not None
    assert trained.epochs[-1].loss_mean < trained.loss[0]
    answered = found["infer"].metrics  # the loss of each of the digits' query batches
    assert answered is not None and len(set(answered.loss[:8])) > 1


TO_TARGET = """
import json
from accelbench.records.spec import RunSpec
from accelbench.engines.tensorflow import time_to_train
spec = RunSpec(
    workload="lenet5", scenario="time-to-train", framework="tensorflow", batch_size=32,
    data="sklearn:digits", target="val_accuracy>=0.8", device="cpu",
)
m = time_to_train.measure(spec)
r = m.record
print(json.dumps([r.outcome, r.curve[-1].val_accuracy, r.steps_to_target, len(m.loss),
                  r.num_train_items, r.num_held_out_items]))
"""


def test_keras_trains_to_a_held_out_target_on_the_torch_workloads_records() -> None:
    """In an interpreter of its own, as the Python API runs a cell: reading --data imports
    triton (torchvision's ops, through torch._dynamo), which crashed the process when
    TensorFlow was imported first."""
    done = subprocess.run([sys.executable, "-c", TO_TARGET], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome, accuracy, steps, losses, train, held_out = json.loads(done.stdout.splitlines()[-1])
    assert outcome == "reached" and accuracy >= 0.8 and steps == losses  # one evaluation an epoch
    assert (train, held_out) == (1437, 360)  # the digits' split, as torch's and JAX's runs read


def test_a_users_keras_model_trains_and_a_jax_one_is_refused_by_name(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.sqlite"
    examples = Path(__file__).parents[2] / "examples"
    for model, scenario in [("my_keras_model.py", "train"), ("my_jax_model.py", "train")]:
        args = ["run", f"{examples / model}:build", "--framework", "tensorflow"]
        args += ["--scenario", scenario, "--batch-size", "8", "--model-arg", "width=32"]
        done = CliRunner().invoke(app, [*args, *QUICK, "--db", str(db)])
        assert done.exit_code in (0, 1), done.output
    found = {
        (Path(r.spec.workload.split(":")[0]).name, r.spec.scenario): r
        for r in ResultStore(db).query()
    }
    ours = found["my_keras_model.py", "train"]  # inference builds it as training does
    assert ours.status == "ok" and ours.metrics is not None, ours.reason
    assert ours.metrics.trainable_params == 64 * 32 + 32 + 32 * 10 + 10
    theirs = found["my_jax_model.py", "train"]
    assert theirs.status == "error" and "must return an accelbench.engines.tensorflow" in (
        theirs.reason or ""
    )
