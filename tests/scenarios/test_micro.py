"""The micro scenario: the device by itself (matmul, triad, copies, collectives), its headline
arithmetic against nccl-tests' formulas, and its runs through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from accelbench import scenarios
from accelbench.analysis import references
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.execution import efficiency
from accelbench.records.environment import DeviceInfo
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.scenarios.micro import MicroMetrics
from accelbench.scenarios.micro.measure import calls_per_step

from ..conftest import needs_cuda, quick, with_rate

QUICK = quick(8)


def micro(workload: str, **spec: object) -> RunSpec:
    fields: dict[str, object] = {"batch_size": 2, "epochs": 2, "steps_per_epoch": 8}
    return RunSpec(workload=workload, scenario="micro", device="cpu", **(fields | spec))


@pytest.fixture(scope="module")
def matmul() -> Result:
    return run(micro("micro/matmul", model_args={"n": 64, "m": 32, "k": 16}))


def test_a_matmul_headline_is_its_calls_times_2mnk(matmul: Result) -> None:
    assert matmul.status == "ok", matmul.reason
    record = matmul.metrics.record if matmul.metrics else None
    assert isinstance(record, MicroMetrics) and record.flops_per_call == 2 * 32 * 64 * 16
    assert record.shape == "32x64x16 float32"
    constructed = with_rate(matmul, 1000.0, spread=0.02)  # calls per second
    headline = constructed.headline
    assert headline is not None and headline.unit == "TFLOP/s"
    assert headline.value == pytest.approx(1000 * 2 * 32 * 64 * 16 / 1e12)
    assert headline.interval == pytest.approx((0.98 * headline.value, 1.02 * headline.value))


def test_a_step_of_few_short_calls_makes_them_again_until_it_lasts(matmul: Result) -> None:
    # 8 calls that took 2 ms: 13 rounds of them make a step of 26 ms, the least over 25 ms.
    assert calls_per_step(8, 0.002, torch.device("cpu")) == 8 * 13
    assert calls_per_step(8, 0.1, torch.device("cpu")) == 8  # long enough already
    record = matmul.metrics.record if matmul.metrics else None
    assert isinstance(record, MicroMetrics) and record.calls_per_step is not None
    assert record.calls_per_step % matmul.spec.batch_size == 0
    assert matmul.metrics is not None and matmul.metrics.items_per_step == record.calls_per_step


@pytest.mark.parametrize(
    ("kind", "ranks", "bus_over_alg"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),  # 2(n-1)/n
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),  # (n-1)/n
        ("reduce_scatter", 8, 0.875),
        ("all_to_all", 4, 0.75),
        ("broadcast", 8, 1.0),
    ],
)
def test_bus_bandwidth_is_nccl_tests_correction_of_algorithm_bandwidth(
    matmul: Result, kind: str, ranks: int, bus_over_alg: float
) -> None:
    from accelbench.scenarios.micro.measure import BUS_FACTOR

    assert BUS_FACTOR[kind](ranks) == pytest.approx(bus_over_alg)
    s = 64 * 2**20  # S: the whole array, as nccl-tests counts it
    record = MicroMetrics(
        measure=kind,
        shape="",
        bytes_per_call=s * bus_over_alg / ranks,
        algorithm_bytes=s,
        bus_factor=bus_over_alg,
    )
    assert matmul.metrics is not None
    per_rank_calls = 250.0  # each rank's calls a second: t = 4 ms a collective
    metrics = with_rate(matmul, per_rank_calls * ranks).metrics  # items: a call on each rank
    assert metrics is not None
    spec = matmul.spec.model_copy(update={"workload": f"micro/{kind}", "replicas": ranks})
    result = matmul.model_copy(
        update={"spec": spec, "metrics": metrics.model_copy(update={"record": record})}
    )
    algbw = s / 4e-3  # S / t
    assert result.headline is not None and result.headline.unit == "GB/s"
    assert result.headline.value == pytest.approx(algbw * bus_over_alg / 1e9)


def test_matmul_and_triad_run_through_the_cli_with_their_lines(tmp_path: Path) -> None:
    db, printed = tmp_path / "r.sqlite", ""
    for workload, arg in (("micro/matmul", "n=128"), ("micro/triad", "mib=4")):
        args = ["run", workload, "--scenario", "micro", "--model-arg", arg, *QUICK]
        done = CliRunner().invoke(app, [*args, "--db", str(db)])
        assert done.exit_code == 0, done.output
        printed += done.stdout
    assert "matmul 128x128x128 float32:" in printed and "triad 3 x 4 MiB float32:" in printed
    with ResultStore(db) as store:
        units = {r.spec.workload: r.headline.unit for r in store.query() if r.headline}
    assert units == {"micro/matmul": "TFLOP/s", "micro/triad": "GB/s"}


def test_collectives_over_2_gloo_ranks_through_the_cli(tmp_path: Path) -> None:
    # Over 4 ranks too, in the bus-bandwidth arithmetic above; here the cells as a user runs them.
    db, sweep = tmp_path / "r.sqlite", tmp_path / "sweep.toml"
    sweep.write_text(
        'fixed = { scenario = "micro", batch_size = 2, epochs = 2, steps_per_epoch = 4, '
        'window_steps = 1, device = "cpu", replicas = 2, model_args = { bytes = 65536 } }\n'
        'axes = { workload = ["micro/all_reduce", "micro/all_gather", "micro/reduce_scatter", '
        '"micro/all_to_all", "micro/broadcast"] }\n'
    )
    done = CliRunner().invoke(app, ["run", "--sweep", str(sweep), "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert "all_reduce 0.0625 MiB float32 over 2 ranks:" in done.stdout
    with ResultStore(db) as store:
        found = {(r.spec.workload, r.spec.replicas): r for r in store.query()}
    assert len(found) == 5 and all(r.status == "ok" for r in found.values())
    for (workload, ranks), r in found.items():  # every collective: its S and its ranks
        record = r.metrics.record if r.metrics else None
        assert isinstance(record, MicroMetrics) and record.algorithm_bytes == 65536
        assert record.measure == workload.removeprefix("micro/")
        assert record.shape.endswith(f"over {ranks} ranks")
        assert record.calls_per_step is not None and record.calls_per_step % 2 == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["micro/matmul"], "measures the device, not a model: give it with --scenario micro"),
        (["tiny_mlp", "--scenario", "micro"], "--scenario micro measures micro/KIND"),
        (["micro/matmul", "--scenario", "micro", "--precision", "amp-bf16"], "one dtype"),
        (["micro/matmul", "--scenario", "micro", "--model-arg", "n=0"], "at least 1"),
        (["micro/triad", "--scenario", "micro", "--model-arg", "n=3"], "takes the model args"),
        (["micro/all_reduce", "--scenario", "micro"], "a collective needs --replicas 2"),
        (["micro/matmul", "--scenario", "micro", "--replicas", "2"], "leave out --replicas"),
        (["micro/copy", "--scenario", "micro", "--device", "cpu"], "run it on an accelerator"),
    ],
)
def test_bad_micro_settings_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = CliRunner().invoke(app, ["run", *args, "--db", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert not (tmp_path / "r.sqlite").exists()


def test_a_host_device_copy_needs_an_accelerator() -> None:
    found = run(micro("micro/copy"))
    assert found.status == "error" and "run it on an accelerator" in str(found.reason)


@needs_cuda
def test_copies_and_matmul_on_cuda_beside_the_datasheet() -> None:
    for direction in ("h2d", "d2h"):
        cell = RunSpec(
            workload="micro/copy",
            scenario="micro",
            device="cuda",
            batch_size=2,
            model_args={"mib": 64, "direction": direction},
        )
        copied = run(cell)
        assert copied.status == "ok" and copied.headline and copied.headline.unit == "GB/s"
    cell = RunSpec(workload="micro/matmul", scenario="micro", device="cuda", batch_size=4)
    product = run(cell.model_copy(update={"precision": "bf16"}))
    record = product.metrics.record if product.metrics else None
    assert isinstance(record, MicroMetrics) and product.headline
    assert record.flops_per_call == 2 * 8192**3 and record.shape.endswith("bfloat16")
    if any(p.name_contains in torch.cuda.get_device_name() for p in efficiency.PEAKS):
        assert record.datasheet_per_s and record.datasheet_source  # set beside it


def _on(result: Result, device: str) -> Result:
    """`result` as if measured on one `device` (an accelerator torch names so)."""
    env = result.env.model_copy(
        update={"device_type": "cuda", "devices": [DeviceInfo(name=device, memory_gib=80.0)]}
    )
    return result.model_copy(update={"env": env})


def test_a_matmul_at_mamfs_shape_is_set_beside_the_published_mamf(matmul: Result) -> None:
    """MAMF (Bekman's Open Book: a measured BF16 matmul at its best shape) is a device's
    anchor, matched as model figures are: same shape, precision and device family."""
    shape = {"m": 2048, "n": 2048, "k": 13312}
    spec = matmul.spec.model_copy(update={"model_args": shape, "precision": "bf16"})
    record = MicroMetrics(
        measure="matmul", shape="2048x2048x13312", flops_per_call=2.0 * 2048 * 2048 * 13312
    )
    assert matmul.metrics is not None
    metrics = matmul.metrics.model_copy(update={"record": record})
    calls = 700e12 / (2.0 * 2048 * 2048 * 13312)  # 700 TFLOP/s
    h100 = with_rate(
        _on(matmul.model_copy(update={"spec": spec, "metrics": metrics}), "NVIDIA H100 80GB HBM3"),
        calls,
    )
    found = references.match(h100)
    assert found is not None and found.reference.value == 794.5
    assert found.measured == pytest.approx(700.0) and found.differences == ()
    assert found.verdict()[0] is references.Agreement.BELOW  # 88%, outside the 10% band
    assert references.match(h100.model_copy(update={"spec": matmul.spec})) is None  # other shape


def test_a_triad_is_set_beside_the_datasheet_memory_bandwidth() -> None:
    bandwidth, source = references.peak_bandwidth("NVIDIA H100 80GB HBM3") or (0.0, "")
    assert bandwidth == 3.35e12 and "H100 SXM" in source and "ml-engineering" in source
    assert references.peak_bandwidth("NVIDIA H200")[0] == 4.8e12  # type: ignore[index]
    assert references.peak_bandwidth("NVIDIA H100 PCIe") is None  # SXM's is not a PCIe card's
    assert references.peak_bandwidth("AMD EPYC 7763") is None


def test_a_triad_line_gives_its_share_of_the_datasheet(matmul: Result) -> None:
    record = MicroMetrics(
        measure="triad",
        shape="3 x 256 MiB float32",
        bytes_per_call=3.0 * 256 * 2**20,
        datasheet_per_s=3.35e12,
        datasheet_source="NVIDIA H100 SXM, Bekman",
    )
    assert matmul.metrics is not None
    spec = matmul.spec.model_copy(update={"workload": "micro/triad", "model_args": {}})
    metrics = matmul.metrics.model_copy(update={"record": record})
    calls = 3.0e12 / (3.0 * 256 * 2**20)  # 3,000 GB/s
    result = with_rate(matmul.model_copy(update={"spec": spec, "metrics": metrics}), calls)
    (line,) = scenarios.get("micro").lines(result, lambda spec: "triad")
    assert line.startswith("triad: triad 3 x 256 MiB float32: 3,000 GB/s, ")
    assert "90% of the datasheet's memory bandwidth, 3,350 GB/s (NVIDIA H100 SXM, Bekman)" in line


def test_named_no_workload_the_micro_scenario_measures_arithmetic_and_memory(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "r.sqlite")
    planned = CliRunner().invoke(app, ["run", "--scenario", "micro", "--dry-run", "--db", db])
    assert planned.exit_code == 0, planned.output
    assert "to run: micro/matmul" in planned.stdout and "to run: micro/triad" in planned.stdout
    assert "2 cell(s)" in planned.stdout
    trained = CliRunner().invoke(app, ["run", "--dry-run", "--db", db])  # a model: name one
    assert trained.exit_code == 2 and "name a workload" in trained.output
