"""Acceptance: each result against a centre's baseline file or the fleet's median, by a rule
that is data."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import acceptance
from accelbench.analysis.acceptance import Baseline, Outcome, Rule
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result
from accelbench.report.database import ResultStore

from ..conftest import tiny
from .test_fleet import QUIET, on_node

SHIPPED = Rule(min_ratio=0.95, judge="value")


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny(steps_per_epoch=8))


def test_the_shipped_rule_is_95_percent_of_the_value() -> None:
    assert acceptance.shipped_rule() == SHIPPED


def test_a_result_passes_at_95_percent_of_its_most_specific_baseline(measured: Result) -> None:
    rows = [
        Baseline(workload="tiny_mlp", value=2000.0, source="any batch"),
        Baseline(workload="tiny_mlp", batch_size=4, value=1000.0, source="batch 4"),
        Baseline(workload="tiny_mlp", batch_size=4, platform="no such", value=1.0),
    ]
    (passed, failed) = acceptance.judge(
        [on_node(measured, 0, 960.0), on_node(measured, 1, 940.0)], SHIPPED, rows
    )
    assert (passed.outcome, passed.baseline, passed.source) == (Outcome.PASS, 1000.0, "batch 4")
    assert passed.ratio == pytest.approx(0.96)
    assert failed.outcome is Outcome.FAIL
    # By its interval, 940 +-2% could be 958.8: not told apart from passing, it passes.
    by_interval = Rule(min_ratio=0.95, judge="interval")
    (near,) = acceptance.judge([on_node(measured, 1, 940.0, spread=0.02)], by_interval, rows)
    assert near.outcome is Outcome.PASS
    (far,) = acceptance.judge([on_node(measured, 1, 940.0, spread=0.01)], by_interval, rows)
    assert far.outcome is Outcome.FAIL


def test_no_baseline_is_said_and_a_failed_cell_fails(measured: Result) -> None:
    other = Baseline(workload="resnet50", value=100.0)
    (alone,) = acceptance.judge([measured], SHIPPED, [other])
    assert alone.outcome is Outcome.NO_BASELINE and alone.ratio is None
    oom = measured.model_copy(update={"status": "oom", "metrics": None})
    (failed,) = acceptance.judge([oom], SHIPPED, [Baseline(workload="tiny_mlp", value=1.0)])
    assert failed.outcome is Outcome.FAIL


def test_the_fleet_median_is_a_baseline(measured: Result) -> None:
    rates = [*QUIET[:7], 900.0, *QUIET[8:]]
    judged = acceptance.judge(
        [on_node(measured, i, r) for i, r in enumerate(rates)], SHIPPED, use_fleet=True
    )
    failed = [j.result.env.hostname for j in judged if j.outcome is Outcome.FAIL]
    assert failed == ["node07"]
    assert {j.source for j in judged} == {"fleet median of 16 nodes"}


def test_accept_exits_1_below_the_baseline_and_a_rule_file_overrides(
    measured: Result, tmp_path: Path
) -> None:
    db, base, rule = tmp_path / "r.sqlite", tmp_path / "base.csv", tmp_path / "rule.toml"
    with ResultStore(db) as store:
        store.add([on_node(measured, 0, 960.0), on_node(measured, 1, 920.0)])
    base.write_text("workload,batch_size,value,source\ntiny_mlp,4,1000,acceptance 2026\n")
    done = CliRunner().invoke(app, ["accept", "--baseline", str(base), "--db", str(db)])
    assert done.exit_code == 1, done.output
    assert "1 fail, 1 pass" in done.stdout
    assert "1 of 2 result(s) below their baseline" in done.stderr
    rule.write_text("min_ratio = 0.9\n")
    args = ["accept", "--baseline", str(base), "--rule", str(rule), "--db", str(db)]
    assert CliRunner().invoke(app, args).exit_code == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workload,value\ntiny_mlp,fast\n", "row 2: value: Input should be a valid number"),
        ("workload,batch_size\ntiny_mlp,4\n", "row 2: value: Field required"),
        ("workload,value\n", "has no rows"),
    ],
)
def test_a_bad_baseline_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "base.csv"
    path.write_text(text)
    with pytest.raises(AccelbenchError, match=message):
        acceptance.load_baselines(path)
    done = CliRunner().invoke(app, ["accept", "--baseline", str(path), "--db", str(tmp_path / "x")])
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and message in done.stderr


def test_a_bad_rule_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "rule.toml"
    path.write_text('judge = "vibes"\n')
    with pytest.raises(AccelbenchError, match=f"rule file {path}: judge: String should match"):
        acceptance.load_rule(path)
