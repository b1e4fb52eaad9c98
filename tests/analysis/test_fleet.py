"""Fleet outliers: the median and MAD of the nodes' rates find a planted slow node, and none
among equal nodes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import fleet
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.records.result import Result, result_key
from accelbench.report.database import ResultStore, fleet_all, source_all
from accelbench.report.listing import Listing
from accelbench.storage import schema

from ..conftest import tiny, with_rate


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny(steps_per_epoch=8))


def on_node(
    base: Result, node: int, items_per_s: float, repeat: int = 0, spread: float = 0.01
) -> Result:
    """`base` as if measured on host node<NN> at this rate (+-spread), on a quiet host."""
    env = base.env.model_copy(update={"hostname": f"node{node:02d}"})
    spec = base.spec.model_copy(update={"repeat": repeat})
    found = with_rate(base, items_per_s, spread)
    return found.model_copy(update={"env": env, "spec": spec, "key": result_key(spec, env)})


def _nodes(cell: tuple[list[fleet.Node], float, float]) -> int:
    return len(cell[0])


# Sixteen nodes within +-0.9% of 1,000 items/s: a quiet fleet's spread.
QUIET = [1000.0 * (1 + 0.0012 * (i - 7.5)) for i in range(16)]


def test_no_node_of_an_equal_fleet_is_an_outlier(measured: Result) -> None:
    for rates in ([1000.0] * 16, QUIET):
        (cell,) = fleet.cells([on_node(measured, i, r) for i, r in enumerate(rates)])
        assert cell.judged and cell.outliers == []
        assert cell.mad == pytest.approx(10.0, rel=0.01)  # the floor: 1% of the median


def test_a_planted_slow_node_is_found_with_its_evidence(measured: Result) -> None:
    rates = [*QUIET[:7], 930.0, *QUIET[8:]]  # node07 7% slow
    (cell,) = fleet.cells([on_node(measured, i, r) for i, r in enumerate(rates)])
    (slow,) = cell.outliers
    assert slow.name == "node07" and slow.rate == 930.0
    median = sorted(rates)[7:9]
    assert cell.median == pytest.approx(sum(median) / 2)
    assert slow.z == pytest.approx(0.6745 * (930.0 - cell.median) / cell.mad)
    assert slow.z < -fleet.Z_BOUND
    # A node 3% off stays in: within the floor's reach of the median.
    near = [*QUIET[:7], 970.0, *QUIET[8:]]
    (cell,) = fleet.cells([on_node(measured, i, r) for i, r in enumerate(near)])
    assert cell.outliers == []


def test_a_node_is_its_repeats_median_and_few_nodes_are_not_judged(measured: Result) -> None:
    results = [on_node(measured, i, 1000.0) for i in range(6)]
    # node00's repeats: one slow run among three does not make the node slow.
    results += [on_node(measured, 0, 500.0, repeat=1), on_node(measured, 0, 1000.0, repeat=2)]
    (cell,) = fleet.cells(results)
    assert cell.outliers == [] and cell.nodes[0].runs == 3
    (few,) = fleet.cells([on_node(measured, i, 1000.0 if i else 500.0) for i in range(4)])
    assert not few.judged and few.outliers == []
    assert fleet.cells([on_node(measured, 0, 1000.0)]) == []  # one node: no fleet


def test_the_fleet_command_lists_the_outlier_and_fails_on_request(
    measured: Result, tmp_path: Path
) -> None:
    db = tmp_path / "site.sqlite"
    rates = [*QUIET[:7], 700.0, *QUIET[8:]]
    with ResultStore(db) as store:
        store.add([on_node(measured, i, r) for i, r in enumerate(rates)])
    done = CliRunner().invoke(app, ["fleet", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert "16 node(s)" in done.stdout and "1 outlier(s)" in done.stdout
    assert "node07: 700 samples/s, 0.70x the median, modified z -20.2" in done.stdout
    failed = CliRunner().invoke(app, ["fleet", "--fail-on-outliers", "--db", str(db)])
    assert failed.exit_code == 1
    assert "1 outlier(s) in the fleet" in failed.stderr


def test_the_fleet_is_judged_from_listings_as_from_the_records(
    measured: Result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a site's 100,000 results the fleet took 9.4 s of CPU making every listing whole for
    five of its fields; the database takes those out of each stored listing, and only a cell's
    name reads a record."""
    db = tmp_path / "site.sqlite"
    results = [on_node(measured, i, r) for i, r in enumerate([*QUIET[:7], 700.0, *QUIET[8:]])]
    other = measured.model_copy(update={"spec": measured.spec.model_copy(update={"batch_size": 8})})
    results += [on_node(other, i, 1000.0) for i in range(3)]  # a second cell, on three nodes
    with ResultStore(db) as store:
        store.add(results)
    with source_all([db]) as (source, _):  # the report's fleet, from whole listings
        expected = list(source.fleet)
    # The runs share one time, so the database gives its cells in the order of their keys,
    # hashes of the platform: compared by cell, the same on any machine.
    judged = sorted(((c.nodes, c.median, c.mad) for c in fleet.cells(results)), key=_nodes)
    assert sorted(((c.nodes, c.median, c.mad) for c in expected), key=_nodes) == judged
    assert len(judged) == 2
    read: list[str] = []
    record = schema.record

    def counted(text: str, *context: dict[str, object]) -> Result:
        read.append(text)
        return record(text, *context)

    monkeypatch.setattr(schema, "record", counted)
    monkeypatch.setattr(Listing, "loads", lambda text: pytest.fail("a listing was made"))
    assert fleet_all([db]) == expected
    assert len(read) == 2  # each cell's first run, which names it
    with sqlite3.connect(db) as con:  # one row as another accelbench listed it
        con.execute("UPDATE results SET listing = '[]' WHERE key = ?", (results[3].key,))
    con.close()
    assert fleet_all([db]) == expected
    with sqlite3.connect(db) as con:  # a schema before: read as it is, from its records
        con.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION - 1}")
    con.close()
    assert fleet_all([db]) == expected


def test_the_report_has_a_fleet_section_only_for_a_fleet(measured: Result, tmp_path: Path) -> None:
    from accelbench.report import document

    rates = [*QUIET[:7], 700.0, *QUIET[8:]]
    page = document.page([on_node(measured, i, r) for i, r in enumerate(rates)], [], ["site"])
    assert f"<h2>{document.FLEET}</h2>" in page and "<li>node07: 700 samples/s" in page
    alone = document.markdown([measured])
    assert document.FLEET not in alone and f"**{document.NOTES}**" in alone


# The trial's fleet: five nodes 12% apart (MAD), one 34% below the median, each run 3 times.
NOISY = [88.0, 100.0, 100.0, 112.0, 66.0]


def _fleet(base: Result, rates: list[float], repeats: int) -> list[Result]:
    wobble = (1.0, 1.01, 0.99)  # runs of a node within 1% of each other
    return [
        on_node(base, i, rate * wobble[k], repeat=k)
        for i, rate in enumerate(rates)
        for k in range(repeats)
    ]


def test_a_slow_node_of_a_noisy_fleet_is_found_by_its_repeats_as_accept_finds_it(
    measured: Result,
) -> None:
    from accelbench.analysis import acceptance

    results = _fleet(measured, NOISY, repeats=3)
    (cell,) = fleet.cells(results)
    assert cell.mad / cell.median == pytest.approx(0.12, rel=0.05)
    (slow,) = cell.outliers
    assert slow.name == "node04" and abs(slow.z) < fleet.Z_BOUND  # the z-score alone misses it
    assert slow.slow_by_rank and slow.p_slower == pytest.approx(1 / 455)  # all 3 below all 12
    assert slow.shift == pytest.approx(66 / 100 - 1, abs=0.01)
    failed = {
        j.result.env.hostname
        for j in acceptance.judge(results, acceptance.shipped_rule(), use_fleet=True)
        if j.outcome is acceptance.Outcome.FAIL
    }
    assert failed == {"node04", "node00"}  # 88 is under 95% of 100 too: accept is a rule
    assert cell.detectable is not None and cell.detectable < 0.5
    # With one run a node, the rank test cannot decide: the z-score's bound is the power.
    (single,) = fleet.cells(_fleet(measured, NOISY, repeats=1))
    assert single.outliers == [] and single.detectable == pytest.approx(
        fleet.Z_BOUND * single.mad / 0.6745 / single.median
    )


def test_an_equal_fleet_with_repeats_calls_no_node_slow(measured: Result) -> None:
    (cell,) = fleet.cells(_fleet(measured, [1000.0] * 8, repeats=3))
    assert cell.outliers == [] and all(not n.slow_by_rank for n in cell.nodes)
    assert cell.detectable == fleet.MIN_SHIFT  # runs within 2%: the margin itself


def test_the_rank_test_is_exact_where_it_can_be() -> None:
    assert fleet.rank_p_lower([1.0, 2.0, 3.0], [float(x) for x in range(4, 16)]) == 1 / 455
    assert fleet.rank_p_lower([9.0, 9.5], [1.0, 2.0, 3.0]) == 1.0
    # Ties count a half: U = 1.5 + 1.5 = 3, and 6 of the C(5, 2) = 10 orderings have U <= 3.
    assert fleet.rank_p_lower([2.0, 2.0], [3.0, 1.0, 2.0]) == 0.6
    big = fleet.rank_p_lower([float(x) for x in range(30)], [x + 0.5 for x in range(30, 60)])
    assert 0 < big < 1e-9  # the normal approximation, far in the tail
