"""Latency in words, for every scenario that measures it: a p99 shown only with the samples to
claim it, and a batch sweep's headlines (the rate at the lowest latency, the highest within a
bound). Each scenario's own lines are in its folder (scenarios/*/report.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from accelbench.analysis import objectives, validity
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.records.stats import Summary
from accelbench.report.cells import describe, label, rate_text


def p99_text(s: Summary) -> str:
    """A p99 latency, shown only with enough samples for one to lie beyond it, and called an
    estimate below the count with which a p99 can be claimed (validity.MIN_P99_SAMPLES)."""
    if s.n >= validity.MIN_P99_SAMPLES:
        return f"p99 {s.p99:.2f} ms"
    if s.n >= validity.MIN_P99_ESTIMATE:
        return f"p99 estimate {s.p99:.2f} ms (a claim needs {validity.MIN_P99_SAMPLES})"
    return f"p99 not shown (needs {validity.MIN_P99_ESTIMATE})"


def headlines(
    results: Sequence[Result],
    latency_bound_ms: float | None,
    name: Callable[[RunSpec], str] = describe,
) -> list[str]:
    """From a batch-size sweep of inference runs: the throughput at the lowest latency, and the
    highest throughput whose p99 latency is known to be within the bound (advice's rule)."""
    lines = []
    for choice in objectives.latency_choices(results, latency_bound_ms):
        low, m = choice.lowest, choice.lowest.metrics
        assert m is not None
        lines.append(
            f"{name(low.spec)}: lowest latency (p50 {m.step_ms_steady.median:.2f} ms) at "
            f"batch {low.spec.batch_size}, {rate_text(low.items_per_s or 0)} {m.item_unit}/s"
        )
        if latency_bound_ms is None:
            continue
        best = choice.best_within
        if best is None or best.metrics is None:
            lines.append(
                f"{label(low.spec)}: no batch size has a p99 latency known to be within "
                f"{latency_bound_ms:g} ms"
            )
            continue
        lines.append(
            f"{name(best.spec)}: highest throughput with p99 within {latency_bound_ms:g} ms: "
            f"{rate_text(best.items_per_s or 0)} {best.metrics.item_unit}/s "
            f"(p99 {best.metrics.step_ms_steady.p99:.2f} ms)"
        )
    return lines
