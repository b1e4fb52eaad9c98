"""Latency in words, for every scenario that measures it: a p99 shown only with the samples to
claim it, and a batch sweep's headlines (the rate at the lowest latency, the highest within a
bound). Each scenario's own lines are in its folder (scenarios/*/report.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from accelbench.analysis import objectives, validity
from accelbench.records.stats import Summary
from accelbench.report.cells import rate_text
from accelbench.report.listing import Listing


def p99_text(s: Summary) -> str:
    """A p99 latency, shown only with enough samples for one to lie beyond it, and called an
    estimate below the count with which a p99 can be claimed (validity.MIN_P99_SAMPLES)."""
    if s.n >= validity.MIN_P99_SAMPLES:
        return f"p99 {s.p99:.2f} ms"
    if s.n >= validity.MIN_P99_ESTIMATE:
        return f"p99 estimate {s.p99:.2f} ms (a claim needs {validity.MIN_P99_SAMPLES})"
    return f"p99 not shown (needs {validity.MIN_P99_ESTIMATE})"


def headlines(
    rows: Sequence[Listing],
    latency_bound_ms: float | None,
    name: Callable[[Listing], str],
) -> list[str]:
    """From a batch-size sweep of inference runs: the throughput at the lowest latency, and the
    highest throughput whose p99 latency is known to be within the bound (advice's rule,
    objectives.within_latency), read from the rows' listings alone."""
    groups: dict[str, list[Listing]] = defaultdict(list)
    for row in rows:
        if row.latency is not None:
            groups[row.batchless].append(row)
    lines = []
    for members in groups.values():
        low = min(members, key=lambda r: r.latency[0] if r.latency else 0.0)
        assert low.latency is not None
        lines.append(
            f"{name(low)}: lowest latency (p50 {low.latency[0]:.2f} ms) at batch "
            f"{low.batch_size}, {rate_text(low.items_per_s or 0)} {low.unit}/s"
        )
        if latency_bound_ms is None:
            continue
        within = [r for r in members if _within(r, latency_bound_ms)]
        if not within:
            lines.append(
                f"{low.label}: no batch size has a p99 latency known to be within "
                f"{latency_bound_ms:g} ms"
            )
            continue
        best = max(within, key=lambda r: r.items_per_s or 0)
        assert best.latency is not None
        lines.append(
            f"{name(best)}: highest throughput with p99 within {latency_bound_ms:g} ms: "
            f"{rate_text(best.items_per_s or 0)} {best.unit}/s (p99 {best.latency[1]:.2f} ms)"
        )
    return lines


def _within(row: Listing, bound_ms: float) -> bool:
    """objectives.within_latency of a listing: a p99 with enough batches behind it."""
    assert row.latency is not None
    _, p99, n = row.latency
    return objectives.p99_within(p99, int(n), bound_ms)
