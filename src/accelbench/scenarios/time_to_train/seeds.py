"""Time to train over seeds: convergence varies from run to run, so MLPerf asks for several runs
of each configuration; here the runs of one cell that differ only in their seed (`--seeds N`) are
summarised together, and the batch of highest throughput is set beside the quickest to train."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.records.result import ANY_BATCH, Result, cell_key
from accelbench.scenarios.base import record_of
from accelbench.scenarios.time_to_train import TimeToTrain


@dataclass(frozen=True)
class SeedSummary:
    """The time-to-train runs of one cell over its seeds."""

    runs: list[Result]
    num_reached: int
    time_to_target_s: list[float]
    """Of the runs that reached the target, fastest first."""
    items_per_s: float | None
    """Median training throughput over the runs."""

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.time_to_target_s) if self.time_to_target_s else None


def by_seed(results: Sequence[Result]) -> list[SeedSummary]:
    """Time-to-train results grouped into cells that differ only in seed (and repeat)."""
    groups: dict[str, list[Result]] = {}
    for r in results:
        if record_of(r, TimeToTrain):
            groups.setdefault(cell_key(r, ignore=("seed",)), []).append(r)
    out = []
    for runs in groups.values():
        times = sorted(
            t.time_to_target_s
            for r in runs
            if r.metrics and (t := r.metrics.of(TimeToTrain)) and t.time_to_target_s is not None
        )
        rates = [r.metrics.items_per_s for r in runs if r.metrics]
        out.append(
            SeedSummary(runs, len(times), times, statistics.median(rates) if rates else None)
        )
    return out


def quickest_vs_fastest(
    summaries: Sequence[SeedSummary],
) -> tuple[SeedSummary, SeedSummary | None] | None:
    """(the cell of highest throughput, the cell of quickest median time to target among those
    that reached it in at least half their seeds, or None if none did), over the cells of one
    workload and target; None for fewer than two cells."""
    if len(summaries) < 2:
        return None
    fastest = max(summaries, key=lambda s: s.items_per_s or 0)
    ranked = [s for s in summaries if s.median_s is not None and 2 * s.num_reached >= len(s.runs)]
    return fastest, min(ranked, key=lambda s: s.median_s or 0, default=None)


def batch_choices(
    results: Sequence[Result],
) -> list[tuple[SeedSummary, SeedSummary | None]]:
    """quickest_vs_fastest over each workload and target's cells that differ only in batch
    (and seed, and the budgets and evaluation cadence, which only end runs)."""
    groups: dict[str, list[SeedSummary]] = {}
    for s in by_seed(results):
        ignore = (*ANY_BATCH, "max_steps", "max_measure_s", "steps_per_epoch")
        groups.setdefault(cell_key(s.runs[0], ignore=ignore), []).append(s)
    return [pair for summaries in groups.values() if (pair := quickest_vs_fastest(summaries))]
