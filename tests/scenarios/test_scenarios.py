"""Scenarios as plug-ins: the registry, a new scenario in one file through every command, and
records stored before the plug-ins read as they are now."""

from __future__ import annotations

import csv
import io
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import scenarios
from accelbench.cli import app
from accelbench.report.database import ResultStore
from accelbench.scenarios.base import Record, Scenario, record_of, resolve
from accelbench.scenarios.generate import GenerateMetrics
from accelbench.scenarios.serve import ServeMetrics
from accelbench.scenarios.server import ServerMetrics
from accelbench.scenarios.time_to_train import TimeToTrain

from ..conftest import tiny

TOY = Path(__file__).parents[1].joinpath("toy_scenario.py")
BEFORE = Path(__file__).parents[1] / "data" / "records_before_scenario_plugins.sqlite"
"""Five results (train, server, generate, time-to-train, serve), written by accelbench at
commit bfa7c7f, before a scenario's record was one field of the metrics."""
runner = CliRunner()


def test_every_builtin_plugin_hands_the_core_its_own_code() -> None:
    """A plug-in names its measure as "module:function" (imported only in a cell's process, so
    that reading results never imports torch or httpx) and hands every other hook as the
    function itself, which the type checker and the layer test see; each lies in a scenario's
    folder, its own but for an exporter two share (MLPerf's logs)."""
    folders = tuple(f"accelbench.scenarios.{n.replace('-', '_')}." for n in scenarios.names())
    for s in scenarios.all_scenarios():
        own = f"accelbench.scenarios.{s.name.replace('-', '_')}."
        assert isinstance(s.measure, str) and s.measure.startswith(own), s.measure
        assert callable(resolve(s.measure)), s.measure
        hooks: list[Callable[..., object] | None] = [s.notes, s.verdict_rules, s.cell_text]
        hooks += [s.table, s.findings, s.headline, s.rules, s.columns, s.words]
        hooks += [f.draw for f in s.figures]
        shared = [target for e in s.exports for target in (e.write, e.files)]
        for target in filter(None, [*hooks, *shared]):
            assert callable(target) and not isinstance(target, str), (s.name, target)
            home = target.__module__ + "."
            defaults = ("accelbench.scenarios.base.",)  # steady_rate, no_rules, ...
            assert home.startswith((*folders, *defaults)), (s.name, target)
            assert target in shared or home.startswith((own, *defaults)), (s.name, target)
        if s.record is not None:
            assert scenarios.record_type(s.name) is s.record


def test_an_unknown_scenario_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown scenario 'trian': give one of train, infer"):
        tiny(scenario="trian")
    out = runner.invoke(app, ["run", "tiny_mlp", "--scenario", "trian", "--device", "cpu"])
    assert out.exit_code != 0 and "unknown scenario 'trian'" in out.output


def test_a_plugin_that_cannot_be_imported_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(scenarios.PLUGINS_ENV, "/nowhere/toy.py")
    out = runner.invoke(app, ["run", "tiny_mlp", "--scenario", "toy", "--device", "cpu"])
    assert out.exit_code == 2
    assert "ACCELBENCH_SCENARIOS: no Python file at /nowhere/toy.py: give a module" in out.output


def test_a_new_scenario_in_one_file_runs_through_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(scenarios.PLUGINS_ENV, str(TOY))
    db = str(tmp_path / "toy.sqlite")
    args = ["run", "tiny_mlp", "--scenario", "toy", "--batch-size", "2,4", "--device", "cpu"]
    args += ["--epochs", "2", "--steps-per-epoch", "4", "--threads", "1", "--db", db]
    # Its knobs are options of `run` as the process starts with the plug-in in its environment.
    out = accelbench(*args, "--toy-passes", "3", "--toy-note", "noted")
    assert out.returncode == 0, out.stderr
    assert re.search(
        r"tiny_mlp toy bs=4 fp32: toy: \d+ parameters, mean loss .*, noted", out.stdout
    )
    shown = accelbench("run", "--help").stdout
    assert "Options of --scenario toy:" in shown and "--toy-passes" in shown
    refused = accelbench("run", "tiny_mlp", "--toy-passes", "2", "--device", "cpu", "--db", db)
    assert refused.returncode == 2 and "--toy-passes goes with --scenario toy" in refused.stderr

    with ResultStore(db) as store:
        stored = store.query()
    assert [r.spec.scenario for r in stored] == ["toy", "toy"]
    assert {(r.spec.knob("toy_passes"), r.spec.knob("toy_note")) for r in stored} == {(3, "noted")}
    record = stored[0].metrics.record if stored[0].metrics else None
    assert record is not None and record.kind == "toy" and record.parameters > 0  # type: ignore[attr-defined]
    assert stored[0].headline and stored[0].headline.unit == "toy items/s"

    table = runner.invoke(app, ["results", "--db", db])
    assert table.exit_code == 0 and "toy" in table.output and "mean loss" in table.output
    exported = runner.invoke(app, ["results", "--format", "csv", "--db", db])
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [row["scenario"] for row in rows] == ["toy", "toy"]
    assert {row["headline_unit"] for row in rows} == {"toy items/s"}
    assert all(int(row["toy_parameters"]) == record.parameters for row in rows)  # type: ignore[attr-defined]

    page = tmp_path / "report.html"
    report = runner.invoke(app, ["report", "--db", db, "--format", "html", "--out", str(page)])
    assert report.exit_code == 0, report.output
    html = page.read_text()
    assert "tiny_mlp: toy throughput against batch size" in html and "mean loss" in html


def accelbench(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, with this one's environment (the plug-in's)."""
    command = [sys.executable, "-m", "accelbench", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def test_records_stored_before_the_plugins_read_and_are_rewritten(tmp_path: Path) -> None:
    db = tmp_path / "before.sqlite"
    shutil.copy(BEFORE, db)
    with sqlite3.connect(db) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        old = dict(conn.execute("SELECT scenario, items_per_s FROM results").fetchall())
    assert version == 3
    with ResultStore(db) as store:  # migrates
        found = {r.spec.scenario: r for r in store.query()}
    kinds: dict[str, type[Record]] = {
        "server": ServerMetrics,
        "generate": GenerateMetrics,
        "time-to-train": TimeToTrain,
        "serve": ServeMetrics,
    }
    for scenario, kind in kinds.items():
        assert record_of(found[scenario], kind) is not None, scenario
    assert found["train"].metrics and found["train"].metrics.record is None
    ttt = record_of(found["time-to-train"], TimeToTrain)
    assert ttt and ttt.outcome == "reached"
    for scenario, r in found.items():  # the headline each was stored with
        assert r.items_per_s == pytest.approx(old[scenario]), scenario
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT json_extract(record, '$.metrics.record.kind') FROM results")
        assert sorted(filter(None, (k for (k,) in rows))) == sorted(kinds)
        (time_to_target,) = conn.execute(
            "SELECT time_to_target_s FROM results WHERE scenario = 'time-to-train'"
        ).fetchone()
    assert time_to_target == ttt.time_to_target_s


def test_a_plugin_naming_a_view_the_report_lacks_is_refused() -> None:
    typo = Scenario(name="typo", summary="s", measure="m:f", views=frozenset({"scalling"}))
    with pytest.raises(ValueError, match=r"typo: no such view \['scalling'\]"):
        scenarios.register(typo)
    assert "typo" not in scenarios.names()


def test_a_plugin_naming_a_hook_by_a_string_is_refused() -> None:
    named = Scenario(name="named", summary="s", measure="m:f", notes="m:lines")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="named: notes is named by a string: hand the function"):
        scenarios.register(named)
    assert "named" not in scenarios.names()


def test_a_plugin_exporting_a_format_another_writes_is_refused() -> None:
    from accelbench.scenarios.base import Export
    from accelbench.scenarios.train.plugin import MLLOG

    shared = Scenario(name="shares", summary="s", measure="m:f", exports=(MLLOG,))
    other = Export(
        "mllog", lambda results, out: (0, 0), takes="runs", writes="run(s)", help="its own logs"
    )
    clash = Scenario(name="clash", summary="s", measure="m:f", exports=(other,))
    with pytest.raises(ValueError, match="clash: another scenario exports 'mllog' otherwise"):
        scenarios.register(clash)
    assert "clash" not in scenarios.names()
    scenarios.register(shared)  # the same format, written the same way, may be shared
    assert scenarios.exports()["mllog"] is MLLOG


def test_a_scenario_whose_code_cannot_be_imported_is_a_failed_cell() -> None:
    from accelbench.cell.runner import run

    scenarios.register(Scenario(name="broken", summary="s", measure="no_such_module:measure"))
    result = run(tiny(scenario="broken", device="cpu"))
    assert result.status == "error" and "No module named 'no_such_module'" in (result.reason or "")
