"""Training runs as MLPerf's :::MLLOG lines, read back by MLPerf's own parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report.database import ResultStore
from accelbench.scenarios.train import exports as mllog

from ..conftest import tiny
from .test_time_to_train import ttt


@pytest.fixture(scope="module")
def measured() -> tuple[Result, Result, Result]:
    """A training run, a time-to-train run that reaches its target, an inference run."""
    found = (
        run(tiny(batch_size=8, epochs=2)),
        run(ttt(max_steps=200)),
        run(tiny(scenario="infer", batch_size=8)),
    )
    assert [r.status for r in found] == ["ok", "ok", "ok"]
    return found


def events(lines: list[str]) -> list[dict[str, Any]]:
    assert all(line.startswith(mllog.PREFIX) for line in lines)
    return [json.loads(line.removeprefix(mllog.PREFIX)) for line in lines]


def test_a_training_log_is_its_record_on_the_clock(measured: tuple[Result, Result, Result]) -> None:
    trained, _, _ = measured
    m = trained.metrics
    assert m is not None
    log = events(mllog.lines(trained))
    at = {
        e["key"]: e["time_ms"] for e in log if e["key"] in ("init_start", "run_start", "run_stop")
    }
    train_ms = 1e3 * sum(e.time_s for e in m.epochs)
    assert at["run_stop"] == round(1e3 * trained.created_at.timestamp())  # the record's end
    assert at["run_stop"] - at["run_start"] == pytest.approx(train_ms, abs=1)
    assert at["run_start"] - at["init_start"] == pytest.approx(1e3 * m.build_s, abs=1)
    stats = [e for e in log if e["key"] == "tracked_stats"]
    assert [e["value"] for e in stats] == [{"throughput": e.items_per_s} for e in m.epochs]
    counts = [e["metadata"] for e in log if e["key"] == "block_stop"]
    assert counts == [{"samples_count": 8 * m.epochs[0].num_steps * k} for k in (1, 2)]
    assert [e["time_ms"] for e in log] == sorted(e["time_ms"] for e in log)
    assert log[-1]["metadata"] == {"status": "success"}


def test_the_export_is_read_by_mlperfs_parser(
    measured: tuple[Result, Result, Result], tmp_path: Path
) -> None:
    mlp_parser = pytest.importorskip("mlperf_logging.compliance_checker.mlp_parser")
    trained, converged, _ = measured
    db, out = tmp_path / "r.sqlite", tmp_path / "result.txt"
    with ResultStore(db) as store:
        store.add([*measured])
    done = CliRunner().invoke(
        app, ["export", "--format", "mllog", "--out", str(out), "--db", str(db)]
    )
    assert done.exit_code == 0, done.output
    assert (
        "wrote 2 training run(s)" in done.stdout and "1 result(s) are not training" in done.stderr
    )
    lines, errors = mlp_parser.parse_file(str(out), ruleset="6.0.0")
    assert errors == [] and len(lines) == len(out.read_text().splitlines())
    keys = [line.key for line in lines]
    assert keys.count("run_start") == keys.count("run_stop") == 2
    benchmarks = [line.value["value"] for line in lines if line.key == "submission_benchmark"]
    assert benchmarks == [trained.spec.workload, converged.spec.workload]
    # Time to train: its evaluations, their loss or accuracy as its target names it.
    evals = [line.value for line in lines if line.key == "eval_accuracy"]
    assert evals and all(0 <= e["value"] <= 1 for e in evals)  # val_accuracy>=0.8: accuracy
    assert evals[-1]["value"] >= 0.8 and "samples_count" in evals[-1]["metadata"]


def test_a_time_to_train_log_passes_mlperfs_training_rules_of_6_1_but_the_benchmark_name(
    measured: tuple[Result, Result, Result], tmp_path: Path
) -> None:
    """MLPerf's checker, ruleset 6.1.0, its common and open-division rules run as
    docs/formats.md runs them (the plain checker stops at a benchmark that is not MLPerf's):
    only the benchmark's name, which must be one of MLPerf's own, fails."""
    compliance = pytest.importorskip("mlperf_logging.compliance_checker.mlp_compliance")
    from mlperf_logging.compliance_checker import mlp_parser

    _, converged, _ = measured
    log = tmp_path / "result_0.txt"
    log.write_text("".join(line + "\n" for line in mllog.lines(converged)))
    rules = Path(compliance.__file__).parent / "training_6.1.0"
    loglines, errors = mlp_parser.parse_file(str(log), ruleset="6.1.0")
    checker = compliance.make_checker("training", "6.1.0", quiet=True, werror=False)
    for config in ("common.yaml", "open_common.yaml"):
        checker.configured_checks(loglines, str(rules / config))
        compliance.enqueued_configs.clear()  # the benchmark's own rules: MLPerf's only
    assert errors == [] and not checker.not_overwritable
    assert set(checker.overwritable) == {"submission_benchmark"}
    found = {e["key"]: e["value"] for e in events(mllog.lines(converged))}
    precision = found["lowest_numerical_precision_in_linear"]
    assert precision == "fp32" == found["lowest_numerical_precision_in_comm"]
    assert (found["tensor_parallelism"], found["micro_batch_size"]) == (
        1,
        converged.spec.batch_size,
    )
