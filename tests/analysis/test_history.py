"""Change points of a cell's history on constructed series: a planted step found where it is and
its size within its interval, no change in noise alone, flagged runs never used, the software
that moved named, and the gate; then through the command on a database of stored runs."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import history
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report.database import ResultStore

from ..conftest import records_read, tiny, with_rate

START = datetime(2026, 11, 1, tzinfo=UTC)
OLD, NEW = {"torch": "2.13.0", "driver": "580.65"}, {"torch": "2.14.1", "driver": "580.65"}


def series(
    n: int, step_at: int | None = None, step: float = -0.08, noise: float = 0.03, seed: int = 0
) -> list[history.Point]:
    """n nightly runs of 100/s with `noise` (relative), `step` from run `step_at` on, where the
    torch version also changes."""
    rng = random.Random(seed)
    points = []
    for i in range(n):
        after = step_at is not None and i >= step_at
        value = 100 * (1 + (step if after else 0)) * (1 + rng.gauss(0, noise))
        points.append(
            history.Point(START + timedelta(days=i), str(i), value, False, NEW if after else OLD)
        )
    return points


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_planted_step_is_found_where_it_is_with_its_size_in_its_interval(seed: int) -> None:
    (change,) = history.changes(series(60, step_at=30, seed=seed))
    assert abs(change.index - 30) <= 1
    assert change.low_pct <= -8 <= change.high_pct and change.pct < 0
    assert change.moved == {"torch": ("2.13.0", "2.14.1")}
    assert change.cause == "torch 2.13.0 -> 2.14.1"


def test_noise_alone_gives_no_change() -> None:
    assert not any(history.changes(series(200, seed=seed)) for seed in range(10))


def test_flagged_runs_are_never_used_to_find_a_change() -> None:
    points = series(40, seed=3)
    values = [0.7 * p.value if i >= 20 else p.value for i, p in enumerate(points)]
    flagged = [
        history.Point(p.at, p.key, v, i >= 20, p.software)
        for i, (p, v) in enumerate(zip(points, values, strict=True))
    ]
    assert history.changes(flagged) == []  # the slow half was flagged (contended, say)
    unflagged = [
        history.Point(p.at, p.key, v, False, p.software)
        for p, v in zip(points, values, strict=True)
    ]
    (change,) = history.changes(unflagged)
    assert change.index == 20 and change.pct == pytest.approx(-30, abs=3)


def test_a_change_with_no_software_moved_says_so() -> None:
    points = [history.Point(p.at, p.key, p.value, False, OLD) for p in series(60, 30, seed=4)]
    (change,) = history.changes(points)
    assert change.cause == "no captured software changed: hardware or configuration"


def test_the_gate_fails_on_the_newest_change_only_when_it_is_a_large_slowdown() -> None:
    (slower,) = history.changes(series(60, step_at=30, seed=0))
    assert history.regression([slower], 5) is slower
    assert history.regression([slower], 10) is None  # -8% is within 10%
    (faster,) = history.changes(series(60, step_at=30, step=0.08, seed=0))
    assert history.regression([faster], 0) is None
    assert history.regression([slower, faster], 0) is None  # the newest is what counts


@pytest.fixture(scope="module")
def nightly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database of 30 nightly runs of one measured cell: from the 16th, 8% slower and under
    another torch version (its stored environment says so), the 5th flagged noisy."""
    db = tmp_path_factory.mktemp("history") / "r.sqlite"
    measured = run(tiny())
    assert measured.status == "ok" and measured.metrics is not None, measured.reason
    # Fed as fast as it steps, whatever this host's load made of its one run: the nights'
    # verdicts are then the ones the test sets (with_rate's quiet host and interval).
    quiet = measured.metrics.model_copy(update={"input_wait_frac": 0.0})
    measured = measured.model_copy(update={"metrics": quiet})
    rng = random.Random(0)
    with ResultStore(db) as store:
        for night in range(30):
            after = night >= 15
            env = measured.env.model_copy(
                update={
                    "versions": measured.env.versions
                    | {"torch": "2.15.0" if after else measured.env.versions["torch"]}
                }
            )
            spec = measured.spec.model_copy(update={"repeat": night})
            rate = 1000 * (0.92 if after else 1.0) * (1 + rng.gauss(0, 0.02))
            one = with_rate(Result.new(spec, env, "ok", metrics=measured.metrics), rate)
            if night == 4:  # a noisy night at half speed: flagged, never used
                one = with_rate(one, rate / 2, spread=0.5)
            store.put(one.model_copy(update={"created_at": START + timedelta(days=night)}))
    return db


def test_history_finds_and_attributes_a_slowdown_and_the_gate_fails(nightly: Path) -> None:
    done = CliRunner().invoke(app, ["history", "--db", str(nightly)])
    assert done.exit_code == 0, done.output
    assert "tiny_mlp bs=4 fp32 on" in done.stdout and "30 runs (1 flagged" in done.stdout
    assert (
        "between 2026-11-15" in done.stdout and "torch" in done.stdout and "2.15.0" in done.stdout
    )
    listed = CliRunner().invoke(app, ["history", "--runs", "--db", str(nightly)]).stdout
    run_lines = [line for line in listed.splitlines() if line.startswith("  2026-")]
    assert len(run_lines) == 30 and "(torch " in run_lines[15] and "-> 2.15.0)" in run_lines[15]
    assert "python " in run_lines[0] and "->" not in "".join(run_lines[1:15])
    gate = CliRunner().invoke(app, ["history", "--db", str(nightly), "--fail-on", "regression:5"])
    assert gate.exit_code == 1 and "regression: tiny_mlp" in gate.stderr
    lenient = ["history", "--db", str(nightly), "--fail-on", "regression:20"]
    assert CliRunner().invoke(app, lenient).exit_code == 0
    answer = CliRunner().invoke(app, ["history", "--db", str(nightly), "--format", "json"])
    document = json.loads(answer.stdout)
    assert document["format"] == "accelbench-history" and document["version"] == 2
    (cell,) = document["series"]
    # Each run's interval and verdict, the software at each: the first's, then what moved.
    assert cell["software"]["torch"] != "2.15.0" and "python" in cell["software"]
    runs = cell["runs"]
    assert [r["moved"] for r in runs if r["moved"]] == [
        {"torch": [cell["software"]["torch"], "2.15.0"]}
    ]
    assert runs[15]["moved"] and runs[4]["verdict"] != "valid" and runs[4]["flagged"]
    assert all(r["interval"][0] <= r["value"] <= r["interval"][1] for r in runs)
    with ResultStore(nightly) as store:  # each run names its stored result
        assert {run["key"] for run in cell["runs"]} == {r.key for r in store.query()}
    (change,) = cell["changes"]
    assert change["at"].startswith("2026-11-16") and change["moved"]["torch"][1] == "2.15.0"
    assert change["interval_pct"][0] <= -8 <= change["interval_pct"][1]


def test_history_reads_no_record_its_listings_keep_the_software(
    nightly: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A site's 100,000 runs: on PostgreSQL, taking the software out of each record took 2.3
    minutes (a cast of each to jsonb). The report's figure reads none either (below)."""
    from accelbench.storage import schema

    monkeypatch.setattr(schema, "record", lambda *_: pytest.fail("a record was read"))
    done = CliRunner().invoke(app, ["history", "--db", str(nightly)])
    assert done.exit_code == 0, done.output
    assert "torch" in done.stdout and "2.15.0" in done.stdout


@pytest.mark.parametrize("given", ["slower", "regression:abc", "regression:150"])
def test_a_bad_gate_is_one_line(nightly: Path, given: str) -> None:
    done = CliRunner().invoke(app, ["history", "--db", str(nightly), "--fail-on", given])
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "regression:PCT" in done.stderr


def test_a_postgresql_database_gives_the_same_history(nightly: Path, fresh_postgres: str) -> None:
    with ResultStore(nightly) as here, ResultStore(fresh_postgres) as site:
        site.add(here.query())
    answers = []
    for db in (str(nightly), fresh_postgres):
        done = CliRunner().invoke(app, ["history", "--db", db, "--format", "json"])
        assert done.exit_code == 0, done.output
        answers.append(json.loads(done.stdout))
    assert answers[0] == answers[1] and answers[0]["series"][0]["changes"]


def test_two_periods_are_set_against_each_other_with_the_ratios_interval() -> None:
    points = series(60, step_at=30, seed=5)
    cut = START + timedelta(days=30)
    found = history.between(points, lambda p: p.at < cut, lambda p: p.at >= cut)
    assert found is not None and (found.first, found.second) == (30, 30)
    assert found.low_pct <= -8 <= found.high_pct
    assert history.between(points, lambda p: p.at < cut, lambda p: False) is None


def test_history_between_two_periods_through_the_command(nightly: Path) -> None:
    for periods in (["..2026-11-15", "2026-11-16.."], ["torch=2.15.0", "torch=2.15.0"]):
        done = CliRunner().invoke(app, ["history", "--db", str(nightly), "--between", *periods])
        assert done.exit_code == 0, done.output
        assert f"{periods[1]} against {periods[0]}:" in done.stdout
    done = CliRunner().invoke(
        app, ["history", "--db", str(nightly), "--between", "..2026-11-15", "2026-11-16.."]
    )
    pct, low, high = (
        float(x)
        for x in re.findall(r"([-+][\d.]+)%? ?\[?([-+][\d.]+), ([-+][\d.]+)\]", done.stdout)[0]
    )
    assert low <= -8 <= high and pct < 0
    bad = CliRunner().invoke(app, ["history", "--db", str(nightly), "--between", "May", "June"])
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "give a day" in bad.stderr


def test_the_html_report_draws_each_cells_history_with_its_change(
    nightly: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = records_read(monkeypatch)
    page, folder = tmp_path / "report.html", tmp_path / "figures"
    done = CliRunner().invoke(
        app, ["report", "--out", str(page), "--figures", str(folder), "--db", str(nightly)]
    )
    assert done.exit_code == 0, done.output
    assert "History: tiny_mlp bs=4 fp32 on" in page.read_text()
    (svg,) = folder.glob("history-*.svg")
    drawn = svg.read_text()  # text stays text in the SVG
    assert "torch " in drawn and "-&gt; 2.15.0" in drawn and "%" in drawn
    assert "30 runs, 1 change point(s)" in page.read_text()
    # The history figure reads none of its 30 runs (their listings keep their software); the
    # other figures read their own (24 here), the table the platform's first.
    assert len(set(read)) < 30
