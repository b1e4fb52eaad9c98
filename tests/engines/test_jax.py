"""JAX as a second engine behind the seam: the same models as torch's (parameters, layers),
cells measured and stored as torch's are, refusals in one line, and keys of torch cells kept."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import engines
from accelbench.cli import app
from accelbench.errors import is_oom, missing_extra
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.scenarios.generate import GenerateMetrics
from accelbench.scenarios.time_to_train import TimeToTrain

from ..conftest import quick

if importlib.util.find_spec("jax") is None:
    pytest.skip("the [jax] extra is not installed", allow_module_level=True)

QUICK = quick(6)
DIGITS = ["--target", "val_loss<=1", "--data", "sklearn:digits"]

MODELS = """
import json, jax, jax.numpy as jnp, numpy as np, torch
from accelbench import workloads
from accelbench.engines.jax import DECODERS, models
found = {"params": {}}
for name in models.MODELS:  # the decoders' shapes only: no weights made, Llama 3.1 8B included
    made = jax.eval_shape if name in DECODERS else lambda init, key: init(key)
    params, _ = made(models.MODELS[name]().init, jax.random.key(0))
    with torch.device("meta"):
        built = workloads.get(name).build_model()
    found["params"][name] = [models.num_params(params), sum(p.numel() for p in built.parameters())]
rng = np.random.default_rng(0)
w = rng.standard_normal((8, 5, 4, 4)).astype(np.float32)  # torch's (in, out, k, k)
x = rng.standard_normal((2, 8, 7, 7)).astype(np.float32)
ours, _ = models._apply(("up", 8, 5), {"w": jnp.asarray(w)}, {}, jnp.asarray(x), True)
theirs = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2, padding=1)
found["transposed_max_error"] = float(np.abs(np.asarray(ours) - theirs.numpy()).max())
layer = ("conv", 96, 96, 3, 1, 1, False)
(params,), _ = models.init([layer], jax.random.key(0))
step = jax.jit(lambda p, x: models._apply(layer, p, {}, x, True)[0])
found["conv_flops"] = step.lower(params, jnp.zeros((1, 96, 14, 14))).cost_analysis()["flops"]
from accelbench.execution.efficiency import flop_counter
resnet = models.MODELS["resnet50"]()
params, state = resnet.init(jax.random.key(0))
forward = jax.jit(lambda p, s, x: resnet.apply(p, s, x, False)[0])
image = jax.ShapeDtypeStruct((1, 3, 224, 224), jnp.float32)
counter = flop_counter()
with torch.device("meta"), counter:
    workloads.get("resnet50").build_model()(torch.zeros(1, 3, 224, 224))
found["resnet50_flops"] = [
    forward.lower(params, state, image).cost_analysis()["flops"], counter.get_total_flops()
]
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def built() -> dict[str, object]:
    """The models built and run in a process of their own: JAX starts threads, and the suite's
    processes fork cells after this."""
    done = subprocess.run([sys.executable, "-c", MODELS], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize(
    "name",
    [
        *("tiny_mlp", "lenet5", "autoencoder", "resnet50"),
        *("llama3_tiny", "llama3_2_1b", "llama3_2_3b", "llama3_1_8b"),
    ],
)
def test_each_model_has_the_torch_models_parameters(built: dict, name: str) -> None:
    ours, torchs = built["params"][name]
    assert ours == torchs


def test_the_engine_offers_the_workloads_it_has_models_of(built: dict) -> None:
    assert set(engines.get("jax").workloads) == set(built["params"])


def test_a_transposed_convolution_is_torchs_with_the_same_weights(built: dict) -> None:
    assert built["transposed_max_error"] < 1e-4


def test_xla_counts_no_multiplication_by_the_padding_where_torch_does(built: dict) -> None:
    # A 3x3 convolution, padding 1, on 14x14: a row of outputs touches 3 * 14 - 2 = 40 input
    # taps, torch counts 3 * 14 = 42 (its formula takes every tap); so does XLA's cost model.
    torch_count = 2 * 96 * 96 * 9 * 14 * 14
    assert built["conv_flops"] == pytest.approx(torch_count * (40 / 42) ** 2)


def test_xlas_count_of_resnet50_is_torchs_but_the_padding(built: dict) -> None:
    # The same forward pass of one image (8.18 GFLOPs by torch's counter); XLA does not count
    # the taps on padding (the test above), most of them in the 7x7 stem and the last stage's
    # 7x7 maps, so it counts 2.8% fewer.
    xla, torchs = built["resnet50_flops"]
    assert 0.95 <= xla / torchs < 1.0


def test_torch_and_jax_cells_run_side_by_side_and_are_stored_alike(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "lenet5,llama3_tiny", "--framework", "torch,jax", "--batch-size", "4"]
    args += QUICK
    done = CliRunner().invoke(app, [*args, "--db", str(db)])
    assert done.exit_code == 0, done.output
    found = {(r.spec.workload, r.spec.framework): r for r in ResultStore(db).query()}
    names = ("lenet5", "llama3_tiny")  # tiny_mlp's JAX cell: benchmarks/jax_bare.py --quick
    assert set(found) == {(w, f) for w in names for f in ("torch", "jax")}
    for result in found.values():
        m = result.metrics
        assert result.status == "ok" and m is not None, result.reason
        # The headline reproduces from the stored steady epochs, as a torch cell's does.
        steady = [e for e in m.epochs if e.index > m.steady_from_step // 6]
        assert m.delivered.num_items == sum(e.num_items for e in steady)
        assert m.items_per_s == pytest.approx(m.delivered.num_items / m.delivered.time_s)
        assert len(m.step_ms) == len(m.loss) == 12 and m.first_step_ms == m.step_ms[0]
        assert m.flops is not None and m.flops.per_item > 0
    jax_cell, torch_cell = found["lenet5", "jax"], found["lenet5", "torch"]
    assert jax_cell.env.versions.get("jax") and jax_cell.metrics is not None
    assert torch_cell.metrics is not None and torch_cell.metrics.flops is not None
    assert jax_cell.metrics.trainable_params == torch_cell.metrics.trainable_params == 61_706
    # XLA's count of LeNet-5's step is torch's within 5% (elementwise work and the update).
    assert jax_cell.metrics.flops is not None
    ratio = jax_cell.metrics.flops.per_item / torch_cell.metrics.flops.per_item
    assert 1.0 <= ratio <= 1.05
    # The decoder: tokens as torch's, the same formula's FLOPs, XLA's count within 5%.
    jax_llm, torch_llm = (found["llama3_tiny", f].metrics for f in ("jax", "torch"))
    assert jax_llm is not None and torch_llm is not None
    assert jax_llm.tokens_per_item == torch_llm.tokens_per_item == 64
    assert jax_llm.flops is not None and torch_llm.flops is not None
    assert jax_llm.flops.analytic_per_item == torch_llm.flops.analytic_per_item
    assert jax_llm.flops.per_item == pytest.approx(torch_llm.flops.per_item, rel=0.05)


def test_inference_under_both_frameworks_counts_the_same_forward_pass(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "llama3_tiny", "--framework", "torch,jax", "--scenario", "infer"]
    done = CliRunner().invoke(app, [*args, "--batch-size", "4", *QUICK, "--db", str(db)])
    assert done.exit_code == 0, done.output
    found = {(r.spec.workload, r.spec.framework): r.metrics for r in ResultStore(db).query()}
    for workload in ("llama3_tiny",):  # LeNet-5's forward pass: -0.2% (docs/extending/engine.md)
        ours, theirs = found[workload, "jax"], found[workload, "torch"]
        assert ours is not None and theirs is not None
        assert len(ours.step_ms) == 12 and ours.step_ms_steady.n > 0
        assert ours.flops is not None and theirs.flops is not None
        assert ours.flops.per_item == pytest.approx(theirs.flops.per_item, rel=0.05)
        assert ours.flops.analytic_per_item == theirs.flops.analytic_per_item


def test_both_frameworks_train_to_a_held_out_target_on_the_same_records(tmp_path: Path) -> None:
    """Time to train under JAX reads the torch workload's records and held-out split: LeNet-5
    on the digits reaches the same accuracy under both, each run's record as torch's."""
    db = tmp_path / "r.sqlite"
    args = ["run", "lenet5", "--framework", "torch,jax", "--scenario", "time-to-train"]
    args += ["--target", "val_accuracy>=0.8", "--data", "sklearn:digits", "--batch-size", "32"]
    done = CliRunner().invoke(app, [*args, "--device", "cpu", "--db", str(db)])
    assert done.exit_code == 0, done.output
    found = {r.spec.framework: r for r in ResultStore(db).query()}
    assert set(found) == {"torch", "jax"}
    records: dict[str, TimeToTrain] = {}
    for framework, result in found.items():
        m = result.metrics
        assert result.status == "ok" and m is not None, result.reason
        record = m.of(TimeToTrain)
        assert record is not None and record.outcome == "reached", record
        records[framework] = record
        point = record.curve[-1]
        assert point.val_accuracy is not None and point.val_accuracy >= 0.8
        assert record.steps_to_target == point.step == len(m.loss)  # an evaluation an epoch
        assert record.time_to_target_s == pytest.approx(sum(e.time_s for e in m.epochs))
    assert records["jax"].num_train_items == records["torch"].num_train_items == 1437
    assert records["jax"].num_held_out_items == records["torch"].num_held_out_items == 360
    assert "jax fp32" in done.output  # the time-to-train table names the framework


def test_jax_trains_and_infers_on_the_torch_workloads_records(tmp_path: Path) -> None:
    """--data: the records torch's cell reads, as numpy batches."""
    db = tmp_path / "r.sqlite"
    args = ["run", "lenet5", "--framework", "jax", "--data", "sklearn:digits", "--batch-size", "8"]
    for scenario in ("train", "infer"):
        done = CliRunner().invoke(app, [*args, "--scenario", scenario, *QUICK, "--db", str(db)])
        assert done.exit_code == 0, done.output
    found = {r.spec.scenario: r for r in ResultStore(db).query()}
    for result in found.values():
        m = result.metrics
        assert result.status == "ok" and m is not None, result.reason
        assert result.spec.data == "sklearn:digits" and len(m.step_ms) == len(m.input_wait_ms) == 12
        assert all(math.isfinite(loss) for loss in m.loss)
    # The same weights (the same seed) answer made queries otherwise: the answers on the
    # digits are the digits'.
    made = tmp_path / "made.sqlite"
    plain = ["run", "lenet5", "--framework", "jax", "--scenario", "infer", "--batch-size", "8"]
    done = CliRunner().invoke(app, [*plain, *QUICK, "--db", str(made)])
    assert done.exit_code == 0, done.output
    (synthetic,) = ResultStore(made).query()
    answered, otherwise = found["infer"].metrics, synthetic.metrics
    assert answered is not None and otherwise is not None
    assert len(set(answered.loss[:8])) > 1 and answered.loss[:8] != otherwise.loss[:8]


def test_replicas_train_data_parallel_over_processes(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "tiny_mlp", "--framework", "jax", "--replicas", "2", "--batch-size", "4"]
    done = CliRunner().invoke(app, [*args, *QUICK, "--db", str(db)])
    assert done.exit_code == 0, done.output
    (result,) = ResultStore(db).query()
    m = result.metrics
    assert result.status == "ok" and m is not None, result.reason
    assert [r.rank for r in m.ranks] == [0, 1]  # each replica's own record, gathered
    assert m.epochs[-1].num_items == 6 * 4 * 2  # a step is the global batch of both replicas
    assert m.flops is not None and m.flops.num_devices == 2
    assert m.epochs[-1].loss_mean is not None and math.isfinite(m.epochs[-1].loss_mean)


def test_generation_under_both_frameworks_streams_every_token(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "llama3_tiny", "--framework", "torch,jax", "--scenario", "generate"]
    lengths = ["--prompt-tokens", "12", "--new-tokens", "5", "--batch-size", "2"]
    done = CliRunner().invoke(app, [*args, *lengths, *QUICK, "--db", str(db)])
    assert done.exit_code == 0, done.output
    found = {r.spec.framework: r for r in ResultStore(db).query()}
    assert sorted(found) == ["jax", "torch"]
    for result in found.values():
        m = result.metrics
        assert result.status == "ok" and m is not None, result.reason
        record = m.record
        assert isinstance(record, GenerateMetrics) and record.new_tokens == 5
        assert len(record.token_ms) == 12 and all(len(t) == 5 for t in record.token_ms)
        assert all(a <= b for t in record.token_ms for a, b in itertools.pairwise(t))
        assert m.tokens_per_item == 5 and record.itl_ms.n == (12 - m.steady_from_step) * 4
    assert found["jax"].headline.unit == found["torch"].headline.unit  # type: ignore[union-attr]


def test_the_cache_decodes_the_tokens_the_whole_sequence_gives() -> None:
    # Greedy tokens made a token a call from the cache are those that the whole sequence, run
    # again for each new token without a cache, makes. Each jitted, as generation runs them
    # (run eagerly, every operation compiles alone: 39 s).
    code = """
import jax, jax.numpy as jnp, numpy as np
from functools import partial
from accelbench.engines.jax import decoder, generate
c = decoder.config("llama3_tiny")
params = decoder.init(c, jax.random.key(0))
ids = jnp.asarray(np.random.default_rng(0).integers(0, c.vocab, (2, 7)), jnp.int32)
token, cache = jax.jit(partial(generate._prefill, c, 7 + 3 - 1))(params, ids)
cached = [token]
step = jax.jit(partial(generate._next, c))
for made in range(1, 3):
    token, cache = step(params, token, cache, 7 + made - 1)
    cached.append(token)
whole, logits = ids, jax.jit(partial(decoder.logits, c))
for _ in range(3):
    nxt = jnp.argmax(logits(params, whole)[:, -1], -1).astype(jnp.int32)
    whole = jnp.concatenate([whole, nxt[:, None]], 1)
assert (np.stack(cached, 1) == np.asarray(whole[:, 7:])).all(), (cached, whole)
print("same")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lenet5", "--framework", "jax", "--scenario", "loader"], "time-to-train, generate, not"),
        (["lenet5", "--framework", "jax", "--scenario", "generate"], "generates with llama3_tiny"),
        (
            [
                *("llama3_tiny", "--framework", "jax", "--scenario", "generate"),
                *("--data", "sklearn:digits"),
            ],
            "leave out --data",
        ),
        (
            [
                "lenet5",
                "--framework",
                "jax",
                "--scenario",
                "time-to-train",
                *DIGITS,
                "--replicas=2",
            ],
            "time-to-train runs one process",
        ),
        (
            ["efficientnet_b0", "--framework", "jax"],
            "builds tiny_mlp, lenet5, autoencoder, resnet50",
        ),
        (["lenet5", "--framework", "jax", "--precision", "fp16"], "not fp16"),
        (["lenet5", "--framework", "jax", "--fsdp"], "runs data-parallel replicas only"),
        (["lenet5", "--framework", "jax", "--scenario", "infer", "--replicas", "2"], "one process"),
        (["lenet5", "--framework", "jax", "--compile"], "leave out --compile"),
        (["lenet5", "--framework", "mxnet"], "unknown framework 'mxnet'"),
    ],
)
def test_a_cell_jax_cannot_run_is_refused_in_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = CliRunner().invoke(app, ["run", *args, "--db", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "r.sqlite").exists()


def test_each_steps_loss_is_rolled_into_a_log_on_the_device_and_read_in_order() -> None:
    # Held as an array of its own, each step's loss cost 2 KB of host memory until the epochs
    # ended (a cell's recorded peak memory grew with its steps); logs of 4 hold them here.
    code = """
import json, jax, jax.numpy as jnp
from accelbench.engines.jax.device import JaxDevice
from accelbench.engines.jax.train import LossLog
log = LossLog(JaxDevice("cpu"), size=4)
step = log.jitted(lambda params, opt_state, state, batch: (params + 1, opt_state, state, params * batch))
carry = [jnp.zeros(()), jnp.zeros(()), jnp.zeros(())]
before = len(jax.live_arrays())
for _ in range(10):
    log.step(step, carry, 2.0)
grown = len(jax.live_arrays()) - before
print(json.dumps([log.read(), grown, log.read()]))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    losses, grown, again = json.loads(done.stdout.strip().splitlines()[-1])
    assert losses == [2.0 * p for p in range(10)]  # two whole logs and half of a third
    assert grown <= 3  # the two filled logs, and not a loss a step
    assert again == []  # each read once


def test_xlas_out_of_memory_is_an_oom_result() -> None:
    from jax.errors import JaxRuntimeError

    assert is_oom(JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate"))


def test_a_framework_not_installed_names_its_extra() -> None:
    for module in ("jax", "optax"):
        line = missing_extra(ModuleNotFoundError(name=module))
        assert line == f"needs {module}: pip install 'accelbench[jax]'"


def test_a_torch_cells_key_does_not_change() -> None:
    spec = RunSpec(workload="tiny_mlp", batch_size=4, device="cpu")
    assert "framework" not in spec.identity()
    assert "framework" in spec.model_copy(update={"framework": "jax"}).identity()
    assert engines.names() == ["torch", "jax", "tensorflow"]


def test_a_users_jax_model_runs_and_a_torch_one_is_refused_by_name(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    examples = Path(__file__).parents[2] / "examples"
    for model in ("my_jax_model.py", "my_model.py"):
        args = ["run", f"{examples / model}:build", "--framework", "jax", "--batch-size", "8"]
        done = CliRunner().invoke(app, [*args, "--model-arg", "width=32", *QUICK, "--db", str(db)])
        assert done.exit_code in (0, 1), done.output
    found = {Path(r.spec.workload.split(":")[0]).name: r for r in ResultStore(db).query()}
    ours = found["my_jax_model.py"]
    assert ours.status == "ok" and ours.metrics is not None, ours.reason
    assert ours.metrics.trainable_params == 64 * 32 + 32 + 32 * 10 + 10
    theirs = found["my_model.py"]
    assert theirs.status == "error" and "must return an accelbench.engines.jax" in (
        theirs.reason or ""
    )


def test_a_lagged_mark_waits_for_the_step_before_and_the_window_for_the_last() -> None:
    waited: list[object] = []

    class Recorded(engines.LaggedDevice):
        def wait(self, output: object) -> None:
            waited.append(output)

    device = Recorded()
    timer = device.timer()
    timer.mark()  # the window opens: nothing waited for
    for step in ("a", "b", "c"):
        timer.mark(step)  # dispatched; the one before it is waited for
        assert waited == ["a", "b", "c"][: ["a", "b", "c"].index(step)]
    assert len(timer.intervals_ms()) == 3 and waited == ["a", "b", "c"]
    device.synchronize()  # the last step dispatched
    assert waited[-1] == "c" and device.latest == "c"


def test_once_steps_are_short_a_mark_waits_once_a_stride_and_shares_its_time() -> None:
    waited: list[object] = []

    class Recorded(engines.LaggedDevice):
        def wait(self, output: object) -> None:
            waited.append(output)

    timer = Recorded().timer()
    timer.mark()
    for step in range(4):  # steps of microseconds: far shorter than SPAN_MS
        timer.mark(step)
    assert len(timer.intervals_ms()) == 4 and timer.stride > 100
    waited.clear()
    timer.stride = 3
    timer.mark()
    for name in "abcdefg":
        timer.mark(name)
    steps = timer.intervals_ms()
    assert waited == ["c", "f", "g"]  # each stride's last, then the window's last
    assert len(steps) == 7 and len(set(steps[:3])) == 1 and len(set(steps[3:6])) == 1


def test_a_step_done_as_it_is_dispatched_ends_at_its_own_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TensorFlow on a CPU runs a step as it is called: marked a step late, the first step took
    two steps' time and the last none (its cells were flagged noisy, +-16%)."""
    clock = [0.0]
    monkeypatch.setattr(engines.time, "perf_counter", lambda: clock[0])

    class Synchronous(engines.LaggedDevice):
        def wait(self, output: object) -> None:
            pass

        def done(self, output: object) -> bool:
            return True

    timer = Synchronous().timer()
    timer.mark()
    for ms in (10.0, 20.0, 30.0):
        clock[0] += ms / 1e3  # the step runs in its call
        timer.mark(ms)
    assert timer.intervals_ms() == pytest.approx([10.0, 20.0, 30.0])
