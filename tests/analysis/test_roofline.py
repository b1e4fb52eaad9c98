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
from accelbench.storage.store import ResultStore

from ..conftest import tiny, with_rate


@pytest.fixture(scope="module")
def measured() -> tuple[Result, Result, Result]:
    """A training run, its loader alone and a matmul, measured here (rates set below)."""
    model = run(tiny(batch_size=4, steps_per_epoch=8))
    loader = run(tiny(batch_size=4, steps_per_epoch=8, scenario="loader"))
    matmul = run(
        RunSpec(
            workload="micro/matmul",
            scenario="micro",
            device="cpu",
            batch_size=2,
            steps_per_epoch=8,
            model_args={"n": 64},
        )
    )
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
    measured: tuple[Result, Result, Result], tmp_path: Path
) -> None:
    model, loader, _ = measured
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add([at(model, 1000.0), at(loader, 1100.0), at(model, 900.0, host="elsewhere")])
    done = CliRunner().invoke(app, ["roofline", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert "input" in done.stdout and "91%" in done.stdout
    assert "1,000 of 1,100 items/s a process, its loader alone (1 run(s))" in done.stdout
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
