"""compare's answers: the JSON document holds what the table shows, and nothing else is on
standard output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import comparison
from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report.database import ResultStore


def test_compare_answers_in_json_what_it_ranks(two_platforms: list[Result], tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add(two_platforms)
    done = CliRunner().invoke(
        app, ["compare", "--by", "platform", "--format", "json", "--db", str(db)]
    )
    assert done.exit_code == 0, done.output
    answer = json.loads(done.stdout)  # the whole of standard output
    assert (answer["format"], answer["version"]) == ("accelbench-compare", 2)
    ok = [r for r in two_platforms if r.status == "ok"]
    expected = comparison.ratios(ok, "platform")
    assert [(r["value"], r["baseline"], r["ranking"]) for r in answer["ratios"]] == [
        (r.value, r.baseline, str(r.ranking)) for r in expected
    ]
    assert [r["ratio"] for r in answer["ratios"]] == pytest.approx([r.ratio for r in expected])
    (summary,) = answer["summary"]
    assert summary["matched"] == len(expected)
    assert summary["faster"] + summary["slower"] + summary["level"] <= len(expected)
    assert summary["level"] == sum(r.ranking is comparison.Ranking.OVERLAP for r in expected)
    assert {u["workload"] for u in answer["unmatched"]} <= {r.spec.workload for r in ok}
