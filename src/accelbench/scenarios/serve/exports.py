"""A serve result's trials as llm-d's benchmark reports, schema 0.2 (github.com/llm-d/
llm-d-benchmark, llmdbenchmark/analysis/benchmark_report/schema_v0_2.py), the form that
inference-perf's results are converted to: one report a trial, a JSON object a line. Reports
written so were validated by that schema's own model, BenchmarkReportV02, at its commit 8bc9f1d.

Each report holds what the record knows and nothing it does not: the run (the result's key as
the experiment, the trial's duration), the load (accelbench as the tool, random prompts, the
lengths asked for, the trial's rate or its closed loop's concurrency, the trial as the stage),
and the requests' aggregate performance computed from each request's own times (TTFT, TPOT,
ITL over every streamed chunk's gap, end-to-end latency, input and output lengths: mean,
spread and percentiles) with the trial's
output-token and request rates. The stack (the server's engine, accelerators and parallelism) is
left out: the record of a server measured from outside does not know it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from importlib.metadata import version
from itertools import pairwise
from typing import Any, TextIO

import numpy as np

from accelbench.records.result import Result
from accelbench.records.spec import stable_hash
from accelbench.scenarios.base import record_of
from accelbench.scenarios.serve.record import ServeMetrics, ServeTrial
from accelbench.scenarios.serve.settings import ServeSettings

VERSION = "0.2"
QUANTILES = {
    "p0p1": 0.1,
    "p1": 1,
    "p5": 5,
    "p10": 10,
    "p25": 25,
    "p50": 50,
    "p75": 75,
    "p90": 90,
    "p95": 95,
    "p99": 99,
    "p99p9": 99.9,
}


def reports(result: Result) -> list[dict[str, Any]]:
    """A report for each trial of a serve result; none for any other result."""
    serve = record_of(result, ServeMetrics)
    if serve is None:
        return []
    return [_report(result, trial, stage) for stage, trial in enumerate(serve.trials)]


def write(results: Iterable[Result], out: TextIO) -> tuple[int, int]:
    """The reports of the serve results among `results`, a line each; returns (reports written,
    results left out: not serve results)."""
    written = left_out = 0
    for result in results:
        found = reports(result)
        left_out += not found
        for report in found:
            out.write(json.dumps(report) + "\n")
            written += 1
    return written, left_out


def files(result: Result) -> list[tuple[str, str]]:
    """Each trial's report as a file of its own (llm-d's import_benchmark_report reads one
    report a file), named by its uid: the result's key and the trial's stage."""
    return [(f"{report['run']['uid']}.json", json.dumps(report)) for report in reports(result)]


def _report(result: Result, trial: ServeTrial, stage: int) -> dict[str, Any]:
    spec, own = result.spec, ServeSettings.of(result.spec)
    ok = [r for r in trial.requests if r.error is None]
    drawn = own.lengths or own.trace  # lengths from a file: their mean, as they came
    prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    outputs = [r.output_tokens for r in ok]
    load: dict[str, Any] = {
        "tool": "accelbench",
        "tool_version": version("accelbench"),
        "source": "random",
        "stage": stage,
        "input_seq_len": _length(own.prompt_tokens, prompts if drawn else None),
        "output_seq_len": _length(own.new_tokens, outputs if drawn else None),
    }
    if trial.rate_per_s:
        load["rate_qps"] = trial.rate_per_s
    if trial.concurrency:
        load["concurrency"] = trial.concurrency
    return {
        "version": VERSION,
        "run": {
            "uid": f"{result.key}-{stage}",
            "eid": result.key,
            "time": {"duration": f"PT{trial.duration_s}S"},
            "description": f"accelbench serve, {result.platform}, trial {stage}",
        },
        "scenario": {
            "load": {
                "metadata": {"cfg_id": stable_hash(spec.identity())},
                "standardized": load,
                "native": {"args": {"endpoint": own.endpoint, "model": spec.workload}},
            }
        },
        "results": {
            "request_performance": {
                "aggregate": {
                    "requests": _drop_none(
                        {
                            "total": len(trial.requests),
                            "failures": len(trial.requests) - len(ok),
                            "input_length": _stats(prompts, "count"),
                            "output_length": _stats(outputs, "count"),
                        }
                    ),
                    "latency": _drop_none(
                        {
                            "time_to_first_token": _stats(
                                [r.ttft_ms / 1e3 for r in ok if r.ttft_ms is not None], "s"
                            ),
                            "time_per_output_token": _stats(
                                [r.tpot_ms / 1e3 for r in ok if r.tpot_ms is not None], "s/token"
                            ),
                            "inter_token_latency": _stats(
                                [(b - a) / 1e3 for r in ok for a, b in pairwise(r.chunk_ms)],
                                "s/token",
                            ),
                            "request_latency": _stats(
                                [r.e2el_ms / 1e3 for r in ok if r.e2el_ms is not None], "s"
                            ),
                        }
                    ),
                    "throughput": {
                        "output_token_rate": {
                            "units": "tokens/s",
                            "mean": trial.output_tokens_per_s,
                        },
                        "request_rate": {"units": "queries/s", "mean": trial.requests_per_s},
                    },
                }
            }
        },
    }


def _length(asked: int, drawn: Sequence[int] | None) -> dict[str, Any]:
    """A length the load asked for: fixed; or drawn from a file's rows, given as the mean of
    the lengths the requests had (its distribution "other")."""
    if drawn:
        return {"distribution": "other", "value": max(1.0, statistics.fmean(drawn))}
    return {"distribution": "fixed", "value": asked}


def _stats(values: Sequence[float], units: str) -> dict[str, Any] | None:
    """Mean, standard deviation, extremes and percentiles (linear between order statistics) of
    the values; None without any."""
    if not values:
        return None
    found: dict[str, Any] = {"units": units, "mean": statistics.fmean(values)}
    if len(values) > 1:
        found["stddev"] = statistics.stdev(values)
    points = np.percentile(np.asarray(values, dtype=float), list(QUANTILES.values()))
    found |= {"min": min(values), **dict(zip(QUANTILES, map(float, points), strict=True))}
    return found | {"max": max(values)}


def _drop_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}
