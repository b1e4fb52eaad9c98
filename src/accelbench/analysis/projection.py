"""Training time projected from throughput: a full convergence run is too costly for a large
workload, so `project` gives the time a given number of epochs would take at a measured
throughput: a projection, said to be one (the time-to-train scenario measures the real one)."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.records.result import Result


@dataclass(frozen=True)
class Projection:
    hours: float
    low_hours: float | None
    high_hours: float | None
    """The 95% interval from the throughput's, None where it has none."""


def project(result: Result, epochs: float, epoch_items: int) -> Projection | None:
    """Time to train `epochs` passes over `epoch_items` items at the result's delivered
    throughput; None without one."""
    rate, ci = result.items_per_s, result.items_per_s_ci
    if not rate or result.status != "ok":
        return None
    items = epochs * epoch_items
    return Projection(
        items / rate / 3600,
        items / ci[1] / 3600 if ci else None,
        items / ci[0] / 3600 if ci else None,
    )
