"""A platform's stored runs of a workload as advice reads them, gathered one run at a time
(`accelbench recommend` streams a site's records): each admissible configuration's runs as a
few numbers (a Run) with its first run whole, how many runs each reason left out, and what the
effective batch range and the gaps read. Memory grows with the configurations, not the runs."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

from accelbench import scenarios
from accelbench.analysis import validity
from accelbench.analysis.objectives import Constraints, within_latency
from accelbench.records.result import ANY_BATCH, Result, cell_key
from accelbench.scenarios.base import series


class Out(StrEnum):
    """Why a measured configuration is left out of the answer."""

    CONTENDED = "contended"
    DRIFTING = "drifting"
    GLOBAL_BATCH = "global-batch"
    DEVICES = "devices"
    LATENCY = "latency"
    MEMORY = "memory"
    NO_PRICE = "no-price"
    NO_ENERGY = "no-energy"
    SLO = "slo"


@dataclass(frozen=True, slots=True)
class Run:
    """One admitted run (a repeat or seed) of a configuration: what the objectives read of it
    (never a contended one: left_out keeps those out)."""

    key: str
    status: str
    items_per_s: float | None
    items_per_s_ci: tuple[float, float] | None
    time_to_target_s: float | None
    joules_per_item: float | None

    @classmethod
    def of(cls, r: Result) -> Run:
        m = r.metrics
        trained = series(r, "time_to_target")
        return cls(
            r.key,
            r.status,
            r.items_per_s,
            r.items_per_s_ci,
            trained.value if trained else None,
            m.joules_per_item if m else None,
        )


def left_out(r: Result, constraints: Constraints) -> Out | None:
    """Why a measured run is not admissible under the constraints; None if it is."""
    c, m = constraints, r.metrics
    if (flag := validity.unranked(r)) is not None:
        return Out(flag.value)
    if c.global_batch is not None and r.spec.global_batch != c.global_batch:
        return Out.GLOBAL_BATCH
    if c.max_devices is not None and r.num_devices > c.max_devices:
        return Out.DEVICES
    if r.spec.scenario in scenarios.with_objective("goodput") and r.items_per_s is None:
        return Out.SLO
    if (
        c.latency_bound_ms is not None
        and r.spec.scenario in scenarios.with_objective("latency")
        and not within_latency(r, c.latency_bound_ms)
    ):
        return Out.LATENCY
    memory = r.env.devices[0].memory_gib if r.env.devices else None
    peak = m.peak_mem_allocated_gib if m else None
    headroom = c.memory_headroom_pct
    if (
        headroom is not None
        and peak is not None
        and memory
        and peak > memory * (1 - headroom / 100)
    ):
        return Out.MEMORY
    return None


@dataclass
class Tally:
    """One platform's runs, added one at a time (add)."""

    constraints: Constraints
    cells: dict[str, list[Run]] = field(default_factory=lambda: defaultdict(list))
    """Each admissible configuration's runs (cell_key less the seed), in the order added."""
    firsts: dict[str, Result] = field(default_factory=dict)
    """Each configuration's first run, whole: what the answer names and describes."""
    excluded: Counter[Out] = field(default_factory=Counter)
    sweeps: dict[str, str] = field(default_factory=dict)
    """Each configuration's batch sweep (cell_key at ANY_BATCH)."""
    ran: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    """Per sweep, the micro batches of every run with metrics, admissible or not."""
    ooms: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    rates: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    """Per sweep and micro batch, the throughputs of the admissible runs that ended ok."""

    def add(self, r: Result) -> None:
        sweep = cell_key(r, ignore=ANY_BATCH)
        if r.metrics:
            self.ran[sweep].add(r.spec.batch_size)
        if r.status == "oom":
            self.ooms[sweep].add(r.spec.batch_size)
        if r.status not in ("ok", "not-converged") or not r.metrics:
            return
        if (why := left_out(r, self.constraints)) is not None:
            self.excluded[why] += 1
            return
        cell = cell_key(r, ignore=("seed",))
        self.cells[cell].append(Run.of(r))
        self.firsts.setdefault(cell, r)
        self.sweeps[cell] = sweep
        if r.status == "ok":
            self.rates[sweep][r.spec.batch_size].append(r.metrics.items_per_s)
