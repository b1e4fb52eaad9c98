"""A training result as MLPerf's `:::MLLOG` lines (github.com/mlcommons/logging), which
MLPerf's own parser (mlperf_logging.compliance_checker.mlp_parser) reads: submission metadata,
init, run_start, each of accelbench's epochs as a block (block_start and block_stop with the
items trained so far as samples_count: an accelbench epoch is a number of steps, not a pass over
a data set) with its throughput (tracked_stats), each evaluation of a
time-to-train run (eval_accuracy: its accuracy, or its loss where the target is a loss, as
MLPerf's Llama 2 70B LoRA logs its loss; epoch_num: the passes over the training split),
run_stop with its status.

The times are rebuilt from the record: the run ended when the record was made; training took
its epochs' time and, for time to train, its evaluations' time beside; initialisation took the
model's build time before. Within a time-to-train run, an evaluation is placed at its training
clock (the evaluations before it are not added), so its times are the training clock's, as the
time to target is. MLPerf's compliance checker is not run on these lines: it checks MLPerf's
own benchmarks, at their data sets and targets, which accelbench does not run; the division is
"open" and the organisation "unknown" (the record does not say it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TextIO

from accelbench import scenarios
from accelbench.records.precision import PRECISIONS
from accelbench.records.result import Result
from accelbench.scenarios.base import record_of
from accelbench.scenarios.time_to_train import TimeToTrain

PREFIX = ":::MLLOG "


def trains(result: Result) -> bool:
    """Whether the result is a training run with metrics: what an MLLOG log describes."""
    return result.metrics is not None and scenarios.get(result.spec.scenario).trains


def lines(result: Result) -> list[str]:
    """The result's log, a line each event, oldest first (trains() must hold)."""
    m, spec = result.metrics, result.spec
    assert m is not None
    ttt = record_of(result, TimeToTrain)
    train_ms = 1e3 * (ttt.train_s if ttt else sum(e.time_s for e in m.epochs))
    eval_ms = 1e3 * ttt.eval_s if ttt else 0.0
    end = 1e3 * result.created_at.timestamp()
    run_start = end - train_ms - eval_ms
    init_start = run_start - 1e3 * m.build_s
    log: list[tuple[float, str, Any, dict[str, Any]]] = [
        (init_start, "cache_clear", False, {}),
        (init_start, "init_start", None, {}),
        (init_start, "submission_benchmark", spec.workload, {}),
        (init_start, "submission_org", "unknown", {}),
        (init_start, "submission_division", "open", {}),
        (init_start, "submission_platform", result.platform, {}),
        (init_start, "seed", spec.seed, {}),
        (init_start, "global_batch_size", spec.global_batch, {}),
        (init_start, "gradient_accumulation_steps", spec.grad_accum, {}),
        (init_start, "micro_batch_size", spec.batch_size, {}),
        *((init_start, key, value, {}) for key, value in disclosed(result).items()),
    ]
    if ttt:
        log += [
            (init_start, "train_samples", ttt.num_train_items, {}),
            (init_start, "eval_samples", ttt.num_held_out_items, {}),
            (init_start, "opt_base_learning_rate", ttt.lr, {}),
        ]
    log += [
        (run_start, "init_stop", None, {}),
        (run_start, "run_start", None, {"accelbench_key": result.key}),
    ]
    clock, items = run_start, 0
    for epoch in m.epochs:  # accelbench's epochs are blocks of steps, not passes over data
        log.append((clock, "block_start", None, {"samples_count": items}))
        clock, items = clock + 1e3 * epoch.time_s, items + epoch.num_items
        counted = {"samples_count": items}
        log.append((clock, "tracked_stats", {"throughput": epoch.items_per_s}, counted))
        log.append((clock, "block_stop", None, counted))
    for point in ttt.curve if ttt else []:
        at = run_start + 1e3 * point.train_s
        where = {"epoch_num": point.data_passes, "samples_count": point.num_items}
        accuracy = "accuracy" in ttt.target if ttt else False
        value = point.val_accuracy if accuracy else point.val_loss
        log += [
            (at, "eval_start", None, where),
            (at, "eval_accuracy", value, where),
            (at, "eval_stop", None, where),
        ]
    status = "success" if result.status == "ok" else "aborted"
    log.append((end, "run_stop", None, {"status": status}))
    # In time order; an event rounding past the end is the end's (epochs sum to it).
    return [_line(min(t, end), *rest) for t, *rest in sorted(log, key=lambda e: min(e[0], end))]


MLPERF_DTYPES = {"float32": "fp32", "bfloat16": "bfloat16", "float16": "fp16"}
"""torch's dtypes by the names MLPerf's rules give them."""


def disclosed(result: Result) -> dict[str, Any]:
    """What MLPerf asks every log to disclose from ruleset 6.1.0: the lowest precision of the
    linear layers, attention and communication (the gradients all-reduced in the weights'
    dtype), the parallelism degrees (accelbench runs no context or expert parallelism) and the
    configuration file (the sweep file or suite the run came from, else its command line)."""
    spec = result.spec
    info = PRECISIONS[spec.precision]
    compute = MLPERF_DTYPES[info.autocast_dtype or info.param_dtype]
    if info.tf32:
        compute = "tf32"
    argv = result.argv or []
    named = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("--sweep", "--suite")]
    named += [arg.split("=", 1)[1] for arg in argv if arg.startswith(("--sweep=", "--suite="))]
    return {
        "lowest_numerical_precision_in_linear": "fp8" if spec.precision == "fp8" else compute,
        "lowest_numerical_precision_in_attn": compute,
        "lowest_numerical_precision_in_comm": MLPERF_DTYPES[info.param_dtype],
        "tensor_parallelism": spec.tensor_parallel,
        "pipeline_parallelism": spec.pipeline_stages,
        "context_parallelism": 1,
        "expert_parallelism": 1,
        "config_filename": named[0] if named else "command line",
    }


def write(results: Iterable[Result], out: TextIO) -> tuple[int, int]:
    """The logs of the training results among `results`, one after another, a result at a time;
    returns (written, left out: not training runs)."""
    written = left_out = 0
    for result in results:
        if not trains(result):
            left_out += 1
            continue
        out.writelines(line + "\n" for line in lines(result))
        written += 1
    return written, left_out


def _line(time_ms: float, key: str, value: Any, metadata: dict[str, Any]) -> str:
    event = {
        "namespace": "",
        "time_ms": round(time_ms),
        "event_type": _TYPES.get(key.rsplit("_", 1)[-1], "POINT_IN_TIME"),
        "key": key,
        "value": value,
        "metadata": metadata,
    }
    return PREFIX + json.dumps(event)


_TYPES = {"start": "INTERVAL_START", "stop": "INTERVAL_END"}
