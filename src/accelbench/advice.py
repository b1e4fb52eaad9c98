"""Advice from stored results: for a workload and an objective, the best configuration on each
platform, how sure that is, and what was not measured (`accelbench recommend`).

Seed 003's conclusion is the brief: "a small deviation from the optimal configuration can lead
to a massive drop in performance", IPUs peak at small batches and GPUs at large ones, so advice
names a configuration per platform, the batch range around it that stays within 5% of its best
throughput (the paper's "effective batch range", section 2.2), and the runs it rests on. Every
answer is computed from measured results; figures from published references are only shown on
request, apart and labelled as such.
"""

from __future__ import annotations

import statistics
import tomllib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from accelbench import references, validity
from accelbench.comparison import Band, band
from accelbench.errors import AccelbenchError
from accelbench.result import Result, cell_key

Objective = Literal["throughput", "time-to-train", "latency", "energy", "cost"]
OBJECTIVES: tuple[str, ...] = get_args(Objective)
BATCH_RANGE_FRAC = 0.95
"""Micro batches at or above this share of the best throughput form the effective batch range."""


@dataclass(frozen=True)
class Constraints:
    global_batch: int | None = None
    """Only configurations with this many items per optimizer step (fixed for convergence)."""
    max_devices: int | None = None
    memory_headroom_pct: float | None = None
    """Keep this share of device memory free: configurations whose peak is above the rest are out."""
    latency_bound_ms: float | None = None
    prices: dict[str, float] = field(default_factory=dict)
    """$ per device-hour by a part of the platform name (for the cost objective)."""

    def text(self) -> str:
        parts = [
            f"global batch {self.global_batch}" if self.global_batch else "",
            f"at most {self.max_devices} devices" if self.max_devices else "",
            f"{self.memory_headroom_pct:g}% memory free" if self.memory_headroom_pct else "",
            f"p99 within {self.latency_bound_ms:g} ms" if self.latency_bound_ms is not None else "",
        ]
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Option:
    """One configuration on one platform: its runs (repeats and seeds) and the objective."""

    runs: list[Result]
    value: float
    low: float | None
    high: float | None
    """Interval of the value: the runs' 95% intervals of throughput, or the seeds' range."""

    @property
    def result(self) -> Result:
        return self.runs[0]


@dataclass(frozen=True)
class Goal:
    scenario: str
    unit: str
    lower_is_better: bool


GOALS: dict[str, Goal] = {
    "throughput": Goal("train", "items/s", False),
    "time-to-train": Goal("time-to-train", "s to target (median over seeds)", True),
    "latency": Goal("infer", "items/s within the latency bound", False),
    "energy": Goal("train", "J per item", True),
    "cost": Goal("train", "$ per million items", True),
}


@dataclass
class Advice:
    platform: str
    options: list[Option]
    """Every admissible configuration, best first."""
    excluded: list[str] = field(default_factory=list)
    """Why measured configurations were left out."""
    not_measured: list[str] = field(default_factory=list)
    confidence: str = ""
    batch_range: list[int] = field(default_factory=list)
    pareto: list[Option] = field(default_factory=list)
    """Configurations no other beats on throughput, devices, p99 latency and energy together,
    when there is more than one."""


def load_prices(path: Path) -> dict[str, float]:
    """A user's price table: `[prices]` then `"platform name part" = dollars per device-hour`."""
    try:
        table = tomllib.loads(path.read_text()).get("prices")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AccelbenchError(f"cannot read prices file {path}: {exc}") from None
    if not isinstance(table, dict) or not table:
        raise AccelbenchError(
            f'{path} has no [prices] table: write e.g. [prices] then "A100" = 2.5 ($ per device-hour)'
        )
    for name, price in table.items():
        if isinstance(price, bool) or not isinstance(price, int | float) or not price > 0:
            raise AccelbenchError(f"{path}: the price of {name!r} must be a positive number")
    return {name: float(price) for name, price in table.items()}


def price_of(platform: str, prices: dict[str, float]) -> float | None:
    """The price whose name is the longest part of the platform's name (case aside)."""
    found = [(len(k), v) for k, v in prices.items() if k.lower() in platform.lower()]
    return max(found)[1] if found else None


def _per_rate(scale: float, rate: Band) -> tuple[float, float | None, float | None]:
    """A cost per item (scale / rate) with the interval the rate's gives."""
    low, high = rate.low, rate.high
    return scale / rate.median, (scale / high if high else None), (scale / low if low else None)


def _option(runs: list[Result], objective: str, constraints: Constraints) -> Option | None:
    first = runs[0]
    if objective == "time-to-train":
        times = sorted(
            t.time_to_target_s
            for r in runs
            if r.metrics and (t := r.metrics.time_to_train) and t.time_to_target_s is not None
        )
        if not times:
            return None
        return Option(runs, statistics.median(times), times[0], times[-1])
    rate = band(runs)
    if objective == "energy":
        joules = [
            r.metrics.joules_per_item for r in runs if r.metrics and r.metrics.joules_per_item
        ]
        if not joules:
            return None
        return Option(runs, *_per_rate(statistics.median(joules) * rate.median, rate))
    if objective == "cost":
        price = price_of(first.env.platform, constraints.prices)
        if price is None:
            return None
        return Option(runs, *_per_rate(price * first.num_devices / 3600 * 1e6, rate))
    return Option(runs, rate.median, rate.low, rate.high)


def _why_out(r: Result, constraints: Constraints) -> str | None:
    c, m = constraints, r.metrics
    if any(flag == "contended" for flag, _ in validity.verdict(r)):
        return "contended: measured while other work shared the platform"
    if c.global_batch is not None and r.spec.global_batch != c.global_batch:
        return f"global batch is not {c.global_batch}"
    if c.max_devices is not None and r.num_devices > c.max_devices:
        return f"more than {c.max_devices} devices"
    bounded = c.latency_bound_ms is not None and r.spec.scenario == "infer"
    if (
        bounded
        and m
        and c.latency_bound_ms is not None
        and m.step_ms_steady.p99 > c.latency_bound_ms
    ):
        return f"p99 latency above {c.latency_bound_ms:g} ms"
    memory = r.env.devices[0].memory_gib if r.env.devices else None
    peak = m.peak_mem_allocated_gib if m else None
    headroom = c.memory_headroom_pct
    if (
        headroom is not None
        and peak is not None
        and memory
        and peak > memory * (1 - headroom / 100)
    ):
        return f"peak memory {peak:.1f} of {memory:.0f} GiB leaves under {headroom:g}% free"
    return None


def recommend(
    results: Sequence[Result],
    workload: str,
    objective: str,
    constraints: Constraints = Constraints(),
    scenario: str | None = None,
) -> list[Advice]:
    """Advice per platform, the platform with the best answer first; `scenario` (train or
    infer) picks the results throughput, energy and cost are read from."""
    if objective not in GOALS:
        raise AccelbenchError(f"unknown objective {objective!r}: give one of {', '.join(GOALS)}")
    if objective == "latency" and constraints.latency_bound_ms is None:
        raise AccelbenchError("the latency objective needs --latency-bound-ms, e.g. 10")
    if objective == "cost" and not constraints.prices:
        raise AccelbenchError(
            "the cost objective needs --prices FILE ($ per device-hour; none are built in)"
        )
    goal = GOALS[objective]
    wanted = scenario or goal.scenario
    mine = [r for r in results if r.spec.workload == workload and r.spec.scenario == wanted]
    by_platform: dict[str, list[Result]] = defaultdict(list)
    for r in mine:
        by_platform[r.env.platform].append(r)
    out = [
        _platform_advice(platform, runs, objective, constraints)
        for platform, runs in by_platform.items()
    ]
    ranked = [a for a in out if a.options]
    ranked.sort(key=lambda a: a.options[0].value, reverse=not goal.lower_is_better)
    return ranked + [a for a in out if not a.options]


def _platform_advice(
    platform: str, runs: list[Result], objective: str, constraints: Constraints
) -> Advice:
    goal = GOALS[objective]
    advice = Advice(platform, [])
    cells: dict[str, list[Result]] = defaultdict(list)
    reasons: dict[str, int] = defaultdict(int)
    for r in runs:
        if r.status not in ("ok", "not-converged") or not r.metrics:
            continue
        why = _why_out(r, constraints)
        if why is None:
            cells[cell_key(r, ignore=("seed",))].append(r)
        else:
            reasons[why] += 1
    advice.excluded = [
        f"{n} measured configuration(s) left out: {why}" for why, n in reasons.items()
    ]
    options = [o for cell in cells.values() if (o := _option(cell, objective, constraints))]
    options.sort(key=lambda o: o.value, reverse=not goal.lower_is_better)
    advice.options = options
    if objective == "cost" and cells and not options:
        advice.excluded.append(f"no price for {platform} in the prices file: add one")
    if not options:
        return advice
    advice.confidence = _confidence(options, goal)
    advice.batch_range = batch_range(
        options[0].result, [r for cell in cells.values() for r in cell]
    )
    advice.not_measured = _not_measured(options[0], runs, objective)
    advice.pareto = _pareto(options)
    return advice


def _confidence(options: list[Option], goal: Goal) -> str:
    best = options[0]
    if best.low is None or best.high is None:
        return "unknown: the best has no interval (too few steady steps or seeds); run more steps"
    if len(options) == 1:
        return "one configuration measured: nothing to set it against"
    second = options[1]
    clear = clears(best, second, goal.lower_is_better)
    if clear is None:
        return "unknown: the runner-up has no interval to set against"
    what = describe(second.result)
    if clear:
        return f"high: its interval clears the runner-up's ({what})"
    return f"low: the runner-up ({what}) is within its interval; either will do, or run --repeats 3"


def clears(best: Option, other: Option, lower_is_better: bool) -> bool | None:
    """Whether `best`'s interval lies wholly on the better side of `other`'s; None where
    either has no interval."""
    if best.low is None or best.high is None or other.low is None or other.high is None:
        return None
    return other.low > best.high if lower_is_better else other.high < best.low


ANY_BATCH = ("batch_size", "grad_accum", "seed")
"""cell_key's fields for the same configuration at any micro batch (and accumulation, and seed)."""


def batch_range(best: Result, runs: Sequence[Result]) -> list[int]:
    """Micro batches whose throughput is within 5% of the best configuration's best, all other
    settings as the best's."""
    same = cell_key(best, ignore=ANY_BATCH)
    rates: dict[int, list[float]] = defaultdict(list)
    for r in runs:
        if r.status == "ok" and r.metrics and cell_key(r, ignore=ANY_BATCH) == same:
            rates[r.spec.batch_size].append(r.metrics.items_per_s)
    medians = {b: statistics.median(v) for b, v in rates.items()}
    top = max(medians.values())
    return sorted(b for b, v in medians.items() if v >= BATCH_RANGE_FRAC * top)


def _not_measured(best: Option, runs: list[Result], objective: str) -> list[str]:
    """What the answer cannot see: batches beyond those tried, the memory boundary, energy
    and memory where they were not measured."""
    batch, m = best.result.spec.batch_size, best.result.metrics
    same = [
        r for r in runs if cell_key(r, ignore=ANY_BATCH) == cell_key(best.result, ignore=ANY_BATCH)
    ]
    fits = sorted({r.spec.batch_size for r in same if r.metrics})
    ooms = sorted({r.spec.batch_size for r in same if r.status == "oom"})
    notes = []
    if ooms:
        below = [b for b in fits if b < ooms[0]]
        largest = below[-1] if below else "none"
        notes.append(f"largest micro batch that fit: {largest}; out of memory at {ooms[0]}")
    if batch == fits[-1] and not ooms:
        notes.append(
            f"micro batches above {batch} were not tried and none ran out of memory: the best "
            "may be larger (`accelbench tune` searches them)"
        )
    if batch == fits[0] and batch > 1:
        notes.append(f"micro batches below {batch} were not tried")
    if objective != "time-to-train" and m and m.joules_per_item is None:
        notes.append("energy was not measured on this platform")
    if m and m.peak_mem_allocated_gib is None:
        notes.append("device memory was not measured here, so memory headroom is not checked")
    return notes


def _pareto(options: list[Option]) -> list[Option]:
    """Options no other is at least as good as on every measure and better on one: throughput
    (up), devices, p99 latency when inferring (a training step's time only grows with its batch)
    and J per item where every option has it (down)."""
    energy = all(o.result.metrics and o.result.metrics.joules_per_item for o in options)

    def measures(o: Option) -> list[float]:
        m = o.result.metrics
        assert m is not None
        values = [-m.items_per_s, float(o.result.num_devices)]
        values += [m.step_ms_steady.p99] if o.result.spec.scenario == "infer" else []
        return values + ([m.joules_per_item or 0.0] if energy else [])

    table = [measures(o) for o in options]
    front = [
        o
        for o, mine in zip(options, table, strict=True)
        if not any(
            all(a <= b for a, b in zip(other, mine, strict=True)) and other != mine
            for other in table
        )
    ]
    return front if len(front) > 1 else []


def describe(r: Result) -> str:
    """A configuration in a few words: micro batch, accumulation, devices, precision."""
    s = r.spec
    text = f"micro batch {s.batch_size}"
    text += f" x accumulation {s.grad_accum}" if s.grad_accum > 1 else ""
    text += f" on {s.num_processes} devices ({s.replicas} replicas)" if s.num_processes > 1 else ""
    return text + f", {s.precision}" + (" +compile" if s.compile else "")


def published(workload: str, platforms_seen: Sequence[str]) -> list[str]:
    """Best published throughput per other platform and device count, labelled as published."""
    from accelbench.references import THROUGHPUT_METRICS

    best: dict[tuple[str, int], references.Reference] = {}
    for ref in references.query(workload=workload):
        if ref.metric not in THROUGHPUT_METRICS or ref.scenario != "train":
            continue
        key = (ref.platform, ref.num_devices)
        if key not in best or ref.value > best[key].value:
            best[key] = ref
    seen = {references.family(p) for p in platforms_seen} - {None}
    return [
        f"published, not measured here: {ref.platform} x{ref.num_devices}: {ref.value:,.0f} "
        f"{ref.unit} at micro batch {ref.micro_batch} ({ref.source}, {ref.table})"
        for (platform, _), ref in sorted(best.items())
        if references.family(platform) not in seen or references.family(platform) is None
    ]
