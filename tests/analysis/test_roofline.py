"""Which ceiling binds: a model's FLOP/s against the matmul measured beside it, its items/s
against its loader's alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import roofline
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.records.result import Result, result_key
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.scenarios.micro import MicroMetrics

from ..conftest import tiny, with_rate


def micro(kind: str, **sizes: int) -> RunSpec:
    """A short micro cell of `kind` on the CPU."""
    return RunSpec(
        workload=f"micro/{kind}",
        scenario="micro",
        device="cpu",
        batch_size=2,
        steps_per_epoch=8,
        model_args=sizes,
    )


@pytest.fixture(scope="module")
def measured() -> tuple[Result, Result, Result]:
    """A training run, its loader alone and a matmul, measured here (rates set below)."""
    model = run(tiny(batch_size=4, steps_per_epoch=8))
    loader = run(tiny(batch_size=4, steps_per_epoch=8, scenario="loader"))
    matmul = run(micro("matmul", n=64))
    assert model.status == loader.status == matmul.status == "ok"
    return model, loader, matmul


def at(result: Result, rate: float, host: str | None = None) -> Result:
    """`result` at this rate (items/s; calls/s for the matmul), on `host` if given."""
    found = with_rate(result, rate)
    if host is None:
        return found
    env = found.env.model_copy(update={"hostname": host})
    return found.model_copy(update={"env": env, "key": result_key(found.spec, env)})


def test_each_ceiling_is_the_model_rate_over_the_measured_one(
    measured: tuple[Result, Result, Result],
) -> None:
    model, loader, matmul = measured
    assert model.metrics is not None and model.metrics.flops is not None
    per_item = model.metrics.flops.per_item
    calls = 1e9 / (2 * 64**3)  # calls/s of the 64^3 matmul at 1 TFLOP/s
    (roof,) = roofline.roofs([at(model, 1000.0), at(loader, 1250.0), at(matmul, calls)])
    compute, drawn = roof.ceilings
    assert compute.name == "compute" and drawn.name == "input"
    assert compute.share == pytest.approx(1000.0 * per_item / 1e12 / 1e-3)
    assert drawn.share == pytest.approx(0.8)
    assert roof.binding is drawn  # 80% of its loader: the input binds
    (slow,) = roofline.roofs([at(model, 500.0), at(loader, 1250.0)])
    assert slow.binding is None and slow.ceilings[0].share == pytest.approx(0.4)


def test_ceilings_come_from_the_same_host_and_matmul_dtype(
    measured: tuple[Result, Result, Result],
) -> None:
    model, loader, matmul = measured
    (elsewhere,) = roofline.roofs([at(model, 1000.0), at(loader, 1250.0, host="other")])
    assert elsewhere.ceilings == []
    bf16 = at(matmul, 1e6).model_copy(
        update={"spec": matmul.spec.model_copy(update={"precision": "bf16"})}
    )
    (fp32,) = roofline.roofs([at(model, 1000.0), bf16])
    assert fp32.ceilings == []  # a bf16 matmul does not bound an fp32 run
    assert [roofline.matmul_precision(p) for p in ("fp32", "tf32", "amp-bf16", "amp-fp16")] == [
        "fp32",
        "tf32",
        "bf16",
        "fp16",
    ]


def test_the_roofline_command_says_what_binds(
    measured: tuple[Result, Result, Result], triad: Result, tmp_path: Path
) -> None:
    model, loader, _ = measured
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add([at(model, 1000.0), at(loader, 1100.0), at(model, 900.0, host="elsewhere")])
        store.add([triad])  # as measured: the model's real state against the real bandwidth
    done = CliRunner().invoke(app, ["roofline", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert "input" in done.stdout and "91%" in done.stdout
    assert "1,000 of 1,100 items/s a process, its loader alone (1 run(s))" in done.stdout
    assert "memory: at least" in done.stdout and "the triad measured here" in done.stdout
    # The run on a host with no ceiling measured is not read, and is counted as left out.
    assert "elsewhere" not in done.stdout
    assert "1 other result(s) ran where no ceiling was measured: left out" in done.stdout


def test_the_report_has_the_ceilings_table_where_ceilings_were_measured(
    measured: tuple[Result, Result, Result],
) -> None:
    from accelbench.report import document

    model, loader, _ = measured
    page = document.page([at(model, 1000.0), at(loader, 1100.0)], [], ["here"])
    assert "Ceilings (binds: reached 80% or more)" in page and "<td" in page
    assert "Ceilings" not in document.markdown([at(model, 1000.0)])


@pytest.fixture(scope="module")
def triad() -> Result:
    """A memory-bandwidth triad measured here (its rate set below)."""
    found = run(micro("triad", mib=1))
    assert found.status == "ok"
    return found


def gb_per_s(micro: Result, value: float, **record: object) -> Result:
    """`micro` with its headline at `value` GB/s: its record's bytes a call changed as given,
    its calls a second set to match."""
    m = micro.metrics
    assert m is not None and isinstance(m.record, MicroMetrics)
    changed = m.record.model_copy(update=record)
    found = micro.model_copy(update={"metrics": m.model_copy(update={"record": changed})})
    return with_rate(found, value * 1e9 / (changed.bytes_per_call or 1.0))


def stepping(model: Result, step_ms: float, **metrics: object) -> Result:
    """`model` with a steady step of `step_ms` and the other metrics given."""
    m = model.metrics
    assert m is not None
    steady = m.step_ms_steady.model_copy(update={"median": step_ms})
    return model.model_copy(
        update={"metrics": m.model_copy(update={"step_ms_steady": steady, **metrics})}
    )


def test_the_memory_floor_and_the_all_reduce_are_shares_of_the_step(
    measured: tuple[Result, Result, Result], triad: Result
) -> None:
    model, _, _ = measured
    spec = model.spec.model_copy(update={"replicas": 2})
    ddp = stepping(model, 100.0, state_gib=1.0, trainable_params=10_000_000)
    ddp = ddp.model_copy(update={"spec": spec})
    reduce_spec = triad.spec.model_copy(update={"workload": "micro/all_reduce", "replicas": 2})
    reduce = triad.model_copy(update={"spec": reduce_spec})
    mib = 2**20
    bucket = gb_per_s(reduce, 10.0, measure="all_reduce", algorithm_bytes=25 * mib)
    small = gb_per_s(reduce, 1.0, measure="all_reduce", algorithm_bytes=mib)
    (roof,) = roofline.roofs([ddp, gb_per_s(triad, 100.0), bucket, small])
    memory, communication = roof.ceilings
    # The optimizer reads and writes 1 GiB once: 2 GiB at 100 GB/s is 21.5 ms of 100.
    assert memory.name == "memory" and memory.share == pytest.approx(2 * 2**30 / 1e11 / 0.1)
    # 10M fp32 gradients, 40 MB, ring all-reduced over 2 ranks (2(n-1)/n = 1) at the 25 MiB
    # message's 10 GB/s: 4 ms of 100; the 1 MiB message's bandwidth is not the one DDP sees.
    assert communication.name == "communication"
    assert communication.share == pytest.approx(40e6 / 10e9 / 0.1)
    assert "25 MiB" in communication.evidence and roof.binding is None
    (bound,) = roofline.roofs([stepping(ddp, 5.0), bucket])  # 4 ms of a 5 ms step
    assert bound.binding is not None and bound.binding.name == "communication"
    alone = ddp.model_copy(update={"spec": model.spec})  # one replica: nothing to all-reduce
    assert [c.name for c in roofline.roofs([alone, bucket])[0].ceilings] == []
