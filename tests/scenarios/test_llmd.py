"""Serving trials as llm-d benchmark reports (schema 0.2): each request's own times summarised,
the load as it was sent, nothing the record does not know."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from typer.testing import CliRunner

from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report.database import ResultStore
from accelbench.scenarios.base import record_of
from accelbench.scenarios.serve import ServeMetrics
from accelbench.scenarios.serve import exports as llmd

from ..conftest import tiny
from .test_serve import served_once

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return served_once(tmp_path_factory.mktemp("served") / "r.sqlite")[0]


def test_a_report_a_trial_with_its_requests_summarised(served: Result) -> None:
    serve = record_of(served, ServeMetrics)
    assert serve is not None
    found = llmd.reports(served)
    assert len(found) == len(serve.trials) == 2  # the closed loop, then 50/s
    loop, arrivals = found
    assert loop["scenario"]["load"]["standardized"]["concurrency"] == serve.trials[0].concurrency
    trial = serve.trials[1]
    load = arrivals["scenario"]["load"]["standardized"]
    assert (load["stage"], load["rate_qps"], load["tool"]) == (1, 50.0, "accelbench")
    assert "concurrency" not in load  # arrivals are not held back: no bound to give
    assert load["output_seq_len"] == {
        "distribution": "fixed",
        "value": served.spec.knob("new_tokens"),
    }
    aggregate = arrivals["results"]["request_performance"]["aggregate"]
    assert aggregate["requests"]["total"] == len(trial.requests) == 4
    assert aggregate["requests"]["failures"] == 0
    ttft = [r.ttft_ms / 1e3 for r in trial.requests if r.ttft_ms is not None]
    drawn = aggregate["latency"]["time_to_first_token"]
    assert drawn["units"] == "s" and drawn["mean"] == pytest.approx(np.mean(ttft))
    assert drawn["p90"] == pytest.approx(np.percentile(ttft, 90))
    assert (drawn["min"], drawn["max"]) == (min(ttft), max(ttft))
    assert aggregate["latency"]["time_per_output_token"]["units"] == "s/token"
    itl = aggregate["latency"]["inter_token_latency"]  # each streamed chunk's gap, as ITL's own
    assert itl["units"] == "s/token" and trial.itl_ms is not None
    assert itl["p50"] * 1e3 == pytest.approx(trial.itl_ms.median)
    assert (itl["min"] * 1e3, itl["max"] * 1e3) == pytest.approx(
        (trial.itl_ms.min, trial.itl_ms.max)
    )
    rates = aggregate["throughput"]
    assert rates["output_token_rate"] == {"units": "tokens/s", "mean": trial.output_tokens_per_s}
    assert rates["request_rate"] == {"units": "queries/s", "mean": trial.requests_per_s}
    assert arrivals["version"] == "0.2" and arrivals["run"]["eid"] == served.key
    assert "stack" not in arrivals["scenario"]  # the server's engine and devices are not known


def test_the_export_writes_a_report_a_line_and_leaves_out_other_results(
    served: Result, tmp_path: Path
) -> None:
    db, out = tmp_path / "r.sqlite", tmp_path / "reports.jsonl"
    with ResultStore(db) as store:
        store.add([served, run(tiny())])
    done = CliRunner().invoke(
        app, ["export", "--format", "br0.2", "--out", str(out), "--db", str(db)]
    )
    assert done.exit_code == 0, done.output
    assert "wrote 2 serving trial(s)" in done.stdout and "1 result(s) are not serve" in done.stderr
    lines = out.read_text().splitlines()
    assert [json.loads(line)["run"]["uid"] for line in lines] == [
        f"{served.key}-{k}" for k in (0, 1)
    ]


def test_into_a_folder_a_report_a_file_as_llm_ds_import_reads_them(
    served: Result, tmp_path: Path
) -> None:
    db, out = tmp_path / "r.sqlite", tmp_path / "reports"
    with ResultStore(db) as store:
        store.add([served])
    done = CliRunner().invoke(
        app, ["export", "--format", "br0.2", "--out", f"{out}/", "--db", str(db)]
    )
    assert done.exit_code == 0, done.output
    assert "wrote 2 serving trial(s) as llm-d reports" in done.stdout
    written = {path.name: json.loads(path.read_text()) for path in out.iterdir()}
    assert written == {f"{r['run']['uid']}.json": r for r in llmd.reports(served)}
    refused = CliRunner().invoke(app, ["export", "--out", str(out), "--db", str(db)])
    assert refused.exit_code == 2
    assert "is a folder, and json is written to one file: give a file path" in refused.output


def test_every_report_validates_against_llm_ds_own_schema(served: Result) -> None:
    schema = json.loads((DATA / "llmd_br_v0_2_json_schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    for report in llmd.reports(served):
        validator.validate(report)
        latency = report["results"]["request_performance"]["aggregate"]["latency"]
        assert latency["inter_token_latency"]["units"] == "s/token"  # ITL, in the schema's form
