"""A stored report reads the listings and only the records its later tables need, and says
what the same report made from every record says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.records.result import Result, result_key
from accelbench.report import document, listing
from accelbench.report.database import ResultStore
from accelbench.report.sections import Brief, first_of_each, wanted

from ..conftest import SIM_PLATFORM, records_read


def stored_counting_reads(
    db: Path, results: list[Result], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Result], list[str]]:
    """`results` stored in `db` as read back; and the keys of every record read after, as each
    ResultStore.records call reads them."""
    with ResultStore(db) as store:
        store.add(results)
        every = store.query()
    return every, records_read(monkeypatch)


def brief(key: str, **fields: Any) -> Brief:
    base = Brief(key, "tiny_mlp", "train", "cpu", 1, 4, "fp32", "ok", "h1", "2026-01-01")
    return base._replace(**fields)


def test_wanted_takes_the_groups_that_span_what_each_table_compares() -> None:
    briefs = [
        brief("alone"),  # one device count, one batch, one host: no table after the first
        brief("one-device", workload="resnet50"),
        brief("two-devices", workload="resnet50", num_devices=2),
        brief("failed", workload="resnet50", num_devices=4, status="error"),
        brief("node-a", workload="bert", hostname="a", scenario="infer"),
        brief("node-b", workload="bert", hostname="b", scenario="infer", status="error"),
        brief("matmul", workload="micro/matmul", scenario="micro", hostname="g"),
        brief("model-beside-it", workload="gpt2", hostname="g"),
        brief("model-elsewhere", workload="gpt2", hostname="h", scenario="infer"),
        brief("converged", workload="autoencoder", scenario="time-to-train"),
    ]
    assert wanted(briefs) == [
        "one-device",  # Table 1: two device counts at one batch
        "two-devices",
        "matmul",  # the roofline: a ceiling and a model measured on one host
        "model-beside-it",
        "converged",  # time to train
    ]
    # The fleet (node-a and node-b: two hosts ran the cell) is judged from the listings.


def test_each_platform_and_host_is_named_by_its_first_result_with_its_count() -> None:
    briefs = [brief("a"), brief("b", hostname="h2"), brief("c"), brief("d", platform="gpu")]
    assert first_of_each(briefs) == [("a", 2), ("b", 1), ("d", 1)]


def test_a_stored_report_reads_few_records_and_says_what_every_record_says(
    two_platforms: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = two_platforms[0]
    nodes = []
    for node in range(5):  # a fleet of five hosts that ran one cell
        env = base.env.model_copy(update={"hostname": f"node{node}"})
        spec = base.spec.model_copy(update={"seed": 7})
        nodes.append(
            base.model_copy(update={"env": env, "spec": spec, "key": result_key(spec, env)})
        )
    db = tmp_path / "site.sqlite"
    every, read = stored_counting_reads(db, [*two_platforms, *nodes], monkeypatch)
    done = CliRunner().invoke(app, ["report", "--format", "md", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert done.output == document.markdown(every)
    assert "Fleet" in done.output and "Table 1" in done.output and "Table 3" in done.output
    # The simulated platform ran one device count on one host: of its records only the one
    # that names it among the platforms is read, and those whose notes need a whole record.
    sim = [r for r in every if r.platform == SIM_PLATFORM]
    needed = [r.key for i, r in enumerate(sim) if i == 0 or listing.of(r).whole]
    assert [r.key for r in sim if r.key in read] == needed and len(needed) < len(sim)
    assert len(set(read)) < len(every)
