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
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from accelbench.analysis import references
from accelbench.analysis.comparison import Band, band_of
from accelbench.analysis.objectives import GOALS, Constraints, Goal, goal_of, latency, price_of
from accelbench.analysis.tally import Out, Run, Tally
from accelbench.errors import AccelbenchError
from accelbench.records.result import ANY_BATCH, Result, cell_key

MIN_RUNS = 3
"""Fresh-process runs (repeats or seeds) of each option before an answer is called sure."""
BATCH_RANGE_FRAC = 0.95
"""Micro batches at or above this share of the best throughput form the effective batch range."""


@dataclass(frozen=True)
class Option:
    """One configuration on one platform: its first run, its runs (repeats and seeds) and the
    objective."""

    result: Result
    runs: list[Run]
    value: float
    low: float | None
    high: float | None
    """Interval of the value: the runs' 95% intervals of throughput, or the seeds' range."""


class Level(StrEnum):
    """How sure the answer is against the runner-up."""

    HIGH = "high"
    """The best's interval clears the runner-up's, each from MIN_RUNS runs or more."""
    FEW_RUNS = "few-runs"
    """The intervals clear, but one of them is from fewer than MIN_RUNS runs: a run's own
    interval says nothing of how the next fresh process will do (one cell gave 6,248 to 10,143
    items/s across runs, each known to +-2-6% within itself)."""
    LOW = "low"
    """The runner-up lies within the best's interval: either will do."""
    ALONE = "alone"
    """One configuration measured: nothing to set it against."""
    NO_INTERVAL = "no-interval"
    """The best has no interval (too few steady steps or seeds)."""
    NO_RUNNER_UP_INTERVAL = "no-runner-up-interval"


@dataclass(frozen=True)
class Confidence:
    level: Level
    runner_up: Option | None = None


@dataclass(frozen=True)
class Gaps:
    """What the answer cannot see, around the best configuration."""

    batch: int
    largest_fit: int | None = None
    """With first_oom: the largest micro batch below it that ran."""
    first_oom: int | None = None
    larger_untried: bool = False
    """The best is the largest micro batch tried and none ran out of memory."""
    smaller_untried: bool = False
    no_energy: bool = False
    no_memory: bool = False


@dataclass
class Advice:
    platform: str
    options: list[Option]
    """Every admissible configuration, best first."""
    excluded: dict[Out, int] = field(default_factory=dict)
    """How many measured runs each reason left out."""
    gaps: Gaps | None = None
    confidence: Confidence | None = None
    batch_range: list[int] = field(default_factory=list)
    pareto: list[Option] = field(default_factory=list)
    """Configurations no other beats on throughput, devices, p99 latency and energy together,
    when there is more than one."""
    frameworks: list[Option] = field(default_factory=list)
    """Each framework's best configuration, best first, where more than one framework ran
    here: which framework serves the objective best on this platform, each at its best."""


def _per_rate(scale: float, rate: Band) -> tuple[float, float | None, float | None]:
    """A cost per item (scale / rate) with the interval the rate's gives."""
    low, high = rate.low, rate.high
    return scale / rate.median, (scale / high if high else None), (scale / low if low else None)


def _option(first: Result, runs: list[Run], objective: str, c: Constraints) -> Option | None:
    rate = band_of([(r.items_per_s, r.items_per_s_ci, None) for r in runs])  # none unranked
    if objective == "time-to-train" and c.tokens is not None:
        tokens_per_item = first.metrics.tokens_per_item if first.metrics else None
        if not tokens_per_item:
            return None
        days = c.tokens / tokens_per_item / 86400  # x seconds per item
        return Option(first, runs, *_per_rate(days, rate))
    if objective == "time-to-train":
        times = sorted(r.time_to_target_s for r in runs if r.time_to_target_s is not None)
        if not times:
            return None
        return Option(first, runs, statistics.median(times), times[0], times[-1])
    if objective == "energy":
        joules = [r.joules_per_item for r in runs if r.joules_per_item]
        if not joules:
            return None
        return Option(first, runs, *_per_rate(statistics.median(joules) * rate.median, rate))
    if objective == "cost":
        price = price_of(first.platform, c.prices)
        if price is None:
            return None
        return Option(first, runs, *_per_rate(price * first.num_devices / 3600 * 1e6, rate))
    return Option(first, runs, rate.median, rate.low, rate.high)


def recommend(
    results: Iterable[Result],
    workload: str,
    objective: str,
    constraints: Constraints | None = None,
    scenario: str | None = None,
) -> list[Advice]:
    """Advice per platform, the platform with the best answer first; `scenario` (train or
    infer) picks the results throughput, energy and cost are read from. `results` are read
    once, a result at a time (analysis.tally)."""
    constraints = constraints or Constraints()
    if objective not in GOALS:
        raise AccelbenchError(f"unknown objective {objective!r}: give one of {', '.join(GOALS)}")
    if objective == "latency" and constraints.latency_bound_ms is None:
        raise AccelbenchError("the latency objective needs --latency-bound-ms, e.g. 10")
    if objective == "cost" and not constraints.prices:
        raise AccelbenchError(
            "the cost objective needs --prices FILE ($ per device-hour; none are built in)"
        )
    if constraints.tokens is not None and objective != "time-to-train":
        raise AccelbenchError("--tokens projects a training time: give --objective time-to-train")
    goal = goal_of(objective, constraints)
    wanted = (scenario,) if scenario else goal.scenarios
    tallies: dict[str, Tally] = {}
    for r in results:
        if r.spec.workload != workload or r.spec.scenario not in wanted:
            continue
        if constraints.tokens is not None and r.metrics and not r.metrics.tokens_per_item:
            raise AccelbenchError(
                f"{workload} reads no tokens: --tokens projects language models (llama3_*, "
                "gpt2_*, bert_*, hf/...); leave it out"
            )
        tallies.setdefault(r.platform, Tally(constraints)).add(r)
    out = [_platform_advice(p, tally, objective) for p, tally in tallies.items()]
    ranked = [a for a in out if a.options]
    ranked.sort(key=lambda a: a.options[0].value, reverse=not goal.lower_is_better)
    return ranked + [a for a in out if not a.options]


def _platform_advice(platform: str, tally: Tally, objective: str) -> Advice:
    goal = goal_of(objective, tally.constraints)
    advice = Advice(platform, [], dict(tally.excluded))
    options = [
        o
        for cell, runs in tally.cells.items()
        if (o := _option(tally.firsts[cell], runs, objective, tally.constraints))
    ]
    options.sort(key=lambda o: o.value, reverse=not goal.lower_is_better)
    advice.options = options
    if objective in ("cost", "energy") and tally.cells and not options:
        unknown = Out.NO_PRICE if objective == "cost" else Out.NO_ENERGY
        advice.excluded[unknown] = sum(map(len, tally.cells.values()))
    if not options:
        return advice
    best = options[0].result
    sweep = tally.sweeps[cell_key(best, ignore=("seed",))]
    advice.confidence = _confidence(options, goal)
    advice.batch_range = _within_best(tally.rates[sweep])
    advice.gaps = _gaps(best, tally.ran[sweep], tally.ooms[sweep], objective)
    advice.pareto = _pareto(options)
    advice.frameworks = _each_framework(options)
    return advice


def _each_framework(options: list[Option]) -> list[Option]:
    """Each framework's first (best) option, in the options' order; none where all are of
    one framework."""
    best: dict[str, Option] = {}
    for o in options:
        best.setdefault(o.result.spec.framework, o)
    return list(best.values()) if len(best) > 1 else []


def _confidence(options: list[Option], goal: Goal) -> Confidence:
    best = options[0]
    if best.low is None or best.high is None:
        return Confidence(Level.NO_INTERVAL)
    if len(options) == 1:
        return Confidence(Level.ALONE)
    second = options[1]
    clear = clears(best, second, goal.lower_is_better)
    if clear is None:
        return Confidence(Level.NO_RUNNER_UP_INTERVAL, second)
    if clear and min(len(best.runs), len(second.runs)) < MIN_RUNS:
        return Confidence(Level.FEW_RUNS, second)
    return Confidence(Level.HIGH if clear else Level.LOW, second)


def clears(best: Option, other: Option, lower_is_better: bool) -> bool | None:
    """Whether `best`'s interval lies wholly on the better side of `other`'s; None where
    either has no interval."""
    if best.low is None or best.high is None or other.low is None or other.high is None:
        return None
    return other.low > best.high if lower_is_better else other.high < best.low


def batch_range(best: Result, runs: Sequence[Result]) -> list[int]:
    """Micro batches whose throughput is within 5% of the best configuration's best, all other
    settings as the best's."""
    same = cell_key(best, ignore=ANY_BATCH)
    rates: dict[int, list[float]] = defaultdict(list)
    for r in runs:
        if r.status == "ok" and r.metrics and cell_key(r, ignore=ANY_BATCH) == same:
            rates[r.spec.batch_size].append(r.metrics.items_per_s)
    return _within_best(rates)


def _within_best(rates: Mapping[int, Sequence[float]]) -> list[int]:
    """The micro batches whose median throughput is within 5% of the best micro batch's."""
    medians = {b: statistics.median(v) for b, v in rates.items()}
    top = max(medians.values())
    return sorted(b for b, v in medians.items() if v >= BATCH_RANGE_FRAC * top)


def _gaps(best: Result, ran: set[int], ooms: set[int], objective: str) -> Gaps:
    """What the answer cannot see: batches beyond those tried (`ran` with metrics, `ooms` out
    of memory, in the best's batch sweep), the memory boundary, energy and memory where they
    were not measured."""
    batch, m = best.spec.batch_size, best.metrics
    fits, oom = sorted(ran), sorted(ooms)
    below = [b for b in fits if oom and b < oom[0]]
    return Gaps(
        batch,
        largest_fit=below[-1] if below else None,
        first_oom=oom[0] if oom else None,
        larger_untried=batch == fits[-1] and not oom,
        smaller_untried=batch == fits[0] and batch > 1,
        no_energy=objective not in ("time-to-train", "goodput")
        and m is not None
        and m.joules_per_item is None,
        no_memory=m is not None and m.peak_mem_allocated_gib is None,
    )


def _pareto(options: list[Option]) -> list[Option]:
    """Options no other is at least as good as on every measure and better on one: throughput
    (up), devices, p99 latency when inferring or serving (a training step's time only grows
    with its batch) and J per item where every option has it (down)."""
    energy = all(o.result.metrics and o.result.metrics.joules_per_item for o in options)

    def measures(o: Option) -> list[float]:
        m = o.result.metrics
        assert m is not None
        values = [-m.items_per_s, float(o.result.num_devices)]
        values += [s.p99] if (s := latency(o.result)) else []
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


def published(workload: str, platforms_seen: Sequence[str]) -> list[references.Reference]:
    """Best published throughput per other platform and device count, labelled as published."""
    from accelbench.analysis.references import THROUGHPUT_METRICS

    best: dict[tuple[str, int], references.Reference] = {}
    for ref in references.query(workload=workload):
        if (
            ref.metric not in THROUGHPUT_METRICS
            or ref.scenario not in GOALS["throughput"].scenarios
        ):
            continue
        key = (ref.platform, ref.num_devices)
        if key not in best or ref.value > best[key].value:
            best[key] = ref
    seen = {references.family(p) for p in platforms_seen} - {None}
    return [
        ref
        for (platform, _), ref in sorted(best.items())
        if references.family(platform) not in seen or references.family(platform) is None
    ]


def ranked_apart(found: Sequence[Advice], objective: str) -> bool | None:
    """Whether the best platform's interval clears the second's (None: fewer than two
    platforms with an answer, or an interval missing)."""
    ranked = [a for a in found if a.options]
    if len(ranked) < 2:
        return None
    lower_is_better = GOALS[objective].lower_is_better
    return clears(ranked[0].options[0], ranked[1].options[0], lower_is_better)
