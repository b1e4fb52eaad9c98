"""Whether a result can be trusted, and why not: a verdict that every table shows.

Rules, each with its reason (a result may break several):
- diverged: the loss became NaN or infinite (time-to-train: or ran away);
- not-converged: time-to-train's budget ended before its target;
- too-short: too few steady-state steps for a 95% interval of the delivered rate, a steady
  state shorter than contention.MIN_WINDOW_S (no CPU reading can judge it), or, when
  inferring, too few batches for a p99 latency at 99% confidence;
- noisy: the delivered rate's interval is wider than the target (spec.ci_pct, else NOISY_PCT),
  or repeats of the cell in fresh processes differ by more than that;
- drifting: the steady state's block rates trend up or down (Mann-Kendall, p < DRIFT_P) by
  more than the target over the window: the interval assumes a stationary rate;
- contended: other processes used the CPUs or the GPU the cell needed, or a hypervisor stole
  CPU time, during the steady state (contention.contended), or the cell ran more CPU processes
  than the host has threads;
- implausible: an MFU above 100%, or FLOPs counted below the weights' floor
  (efficiency.flops_floor): the count or the peak is wrong, so the MFU means nothing;
- throttled: NVML reported a thermal or hardware slowdown during the measured window, or a
  power cap below the board's default (EnergyMetrics.slowdowns);
- input-bound: the training loop waited for input for more than INPUT_BOUND_FRAC of the time;
- server: too-slow (no rate tried kept p99 within the bound), too-short (too few queries for a
  p99), overloaded (answered less than OVERLOAD_FRAC of the target rate);
- serve: too-slow (no rate tried met the SLO), too-short (too few requests at the reported rate
  for its 99% share), overloaded (as the server's), failed-requests (some requests at the
  reported rate failed: the server, not the load, decided that rate's numbers).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from accelbench import scenarios
from accelbench.records import contention, throughput
from accelbench.records.energy import EnergyMetrics
from accelbench.records.frozen import last
from accelbench.records.metrics import Flops, Metrics
from accelbench.records.result import Result
from accelbench.records.stats import early_stopping_samples


class Flag(StrEnum):
    """A rule a result breaks (the module's docstring gives each); the reason beside it in a
    verdict is its evidence in words, for people: nothing decides on it."""

    DIVERGED = "diverged"
    NOT_CONVERGED = "not-converged"
    TOO_SHORT = "too-short"
    NOISY = "noisy"
    CONTENDED = "contended"
    IMPLAUSIBLE = "implausible"
    THROTTLED = "throttled"
    INPUT_BOUND = "input-bound"
    TOO_SLOW = "too-slow"
    OVERLOADED = "overloaded"
    FAILED_REQUESTS = "failed-requests"
    DRIFTING = "drifting"


NOISY_PCT = 5.0
"""Without a target, a rate known only to within more than +-5% is noisy."""
INPUT_BOUND_FRAC = 0.10
MIN_P99_ESTIMATE = 100
"""Latencies below which no p99 is estimated at all (at least one must lie beyond it): shown
with its count, and what a server's rate search goes by; a claim needs MIN_P99_SAMPLES."""
MIN_P99_SAMPLES = early_stopping_samples(0)
"""Latencies below which no p99 can be claimed: 459, the fewest with which a 99th percentile
holds at 99% confidence, none beyond it (MLPerf LoadGen's early stopping; from 100, all within
a bound, the claim has 63% confidence)."""


def throttled(energy: EnergyMetrics) -> str:
    why = "device slowed down: " + ", ".join(energy.slowdowns)
    if "sw-power-cap" in energy.slowdowns and energy.default_power_limit_w is not None:
        limits = energy.power_limit_w, energy.default_power_limit_w
        why += " (limit {:.0f} W, the board's default {:.0f} W)".format(*limits)
    return why


def verdict(result: Result, repeats: Sequence[Result] = ()) -> list[tuple[Flag, str]]:
    """(flag, reason) for each rule the result breaks; empty means valid. `repeats` are the
    results of the same cell's other repeats (results with one cell_key). Without repeats,
    found once for the last result asked (a stored result's listing and flat row both ask)."""
    return _verdict(result, repeats) if repeats else list(_alone(result))


@last
def _alone(result: Result) -> tuple[tuple[Flag, str], ...]:
    """The result's verdict without repeats."""
    return tuple(_verdict(result, ()))


def _verdict(result: Result, repeats: Sequence[Result]) -> list[tuple[Flag, str]]:
    m, spec = result.metrics, result.spec
    flags: list[tuple[Flag, str]] = []
    if result.status in ("diverged", "not-converged"):
        flags.append((Flag(result.status), result.reason or "the loss became NaN or infinite"))
    if m is None:
        return flags
    target = spec.ci_pct or NOISY_PCT
    scenario = scenarios.get(spec.scenario)
    if scenario.rated_by_steps:  # others' steps are a capacity phase's: not the headline
        flags += _rate_flags(m, scenario.batch_latency, target)
    flags += scenario.verdicts(result)
    if m.host is not None and (why := contention.contended(m.host)):
        flags.append((Flag.CONTENDED, why))
    if result.env.device_type == "cpu" and spec.processes_per_node > result.env.num_cpu_threads:
        flags.append(
            (
                Flag.CONTENDED,
                f"{spec.processes_per_node} processes shared {result.env.num_cpu_threads} CPU "
                "threads, taking turns: the ranks' numbers are right, their speed is not",
            )
        )
    if m.flops is not None and (why := implausible(m.flops, m.mfu)):
        flags.append((Flag.IMPLAUSIBLE, why))
    if m.energy is not None and m.energy.throttled:
        flags.append((Flag.THROTTLED, throttled(m.energy)))
    if m.input_wait_frac is not None and m.input_wait_frac > INPUT_BOUND_FRAC:
        flags.append(
            (
                Flag.INPUT_BOUND,
                f"{100 * m.input_wait_frac:.0f}% of step time waiting for input: give --workers auto (or a count)",
            )
        )
    spread = repeat_spread([result, *repeats])  # the cell's, after the result's own
    if spread is not None and spread > target:
        flags.append(
            (Flag.NOISY, f"{len(repeats) + 1} repeats differ by {spread:.1f}%, target {target:g}%")
        )
    return flags


def _rate_flags(m: Metrics, batch_latency: bool, target: float) -> list[tuple[Flag, str]]:
    """The first rule the delivered rate breaks: too few steady steps or (inferring) batches
    for a p99, a steady state too short for a CPU reading, or an interval wider than target."""
    rate, more = m.delivered, "run more steps"
    if len(rate.block_s) < throughput.MIN_BLOCKS:
        why = f"{len(rate.block_s)} steady steps; {throughput.MIN_BLOCKS} give a 95% interval"
        return [(Flag.TOO_SHORT, f"{why}: {more}")]
    if batch_latency and (
        short := percentile_short(m.step_ms_steady.n, None, "steady batches", more)
    ):
        return [(Flag.TOO_SHORT, short)]
    if rate.time_s < contention.MIN_WINDOW_S:
        why = (
            f"the steady state lasted {rate.time_s:.3g} s; under {contention.MIN_WINDOW_S:g} s "
            "no CPU reading can tell whether other work shared it"
        )
        fix = f"give --min-steady-s {contention.MIN_WINDOW_S:g} or more, or --max-measure-s more"
        return [(Flag.TOO_SHORT, f"{why}: {fix}")]
    if (drift := drifting(rate, target)) is not None:
        return [(Flag.DRIFTING, drift)]
    if rate.ci_pct is None:
        return [(Flag.NOISY, "the steady steps vary too much for a bounded interval")]
    if rate.ci_pct > target:
        return [(Flag.NOISY, f"rate known to +-{rate.ci_pct:.1f}%, target +-{target:g}%")]
    return []


DRIFT_P = 0.01
"""The Mann-Kendall p-value below which a trend is taken as real: a stationary series is
flagged about once in a hundred runs, and only if its trend is also as large as the target."""


def drifting(rate: throughput.Delivered, target: float) -> str | None:
    """Why the steady state is not steady: a significant trend of its block rates that changes
    the rate by more than the interval's target over the window; None if none."""
    t = throughput.trend(rate)
    if t is None or t.p >= DRIFT_P or abs(t.change_pct) <= target:
        return None
    return (
        f"the rate moved {t.change_pct:+.1f}% through the steady state ({t.first:.4g}/s in its "
        f"first fifth, {t.last:.4g}/s in its last; {t.per_min_pct:+,.1f}% a minute; Mann-Kendall "
        f"p={t.p:.1g}): no interval holds for a moving rate; look for throttling, a leak or a "
        "growing cache"
    )


IMPLAUSIBLE_BELOW_FLOOR = 2.0
"""A FLOP count below the weights' floor (Flops.floor_per_item) divided by this missed work the
counter cannot see."""


def implausible(flops: Flops, mfu: float | None) -> str | None:
    """Why a FLOP count or an MFU cannot be right; None if nothing says so."""
    if mfu is not None and mfu > 1:
        return (
            f"MFU {100 * mfu:.0f}% is above 100%: the peak ({flops.peak_source}) is below what "
            "the model reached"
        )
    floor = flops.floor_per_item
    if floor and flops.per_item < floor / IMPLAUSIBLE_BELOW_FLOOR:
        return (
            f"{flops.per_item:.3g} FLOPs counted per item, below the weights' floor of "
            f"{floor:.3g}: the counter missed work, so FLOP/s and MFU are not known"
        )
    return None


OVERLOAD_FRAC = 0.9
"""A server trial answering less than this share of its target rate did not keep up."""


def percentile_short(n: int, overs: int | None, what: str, fix: str) -> str | None:
    """Why n samples, `overs` of them beyond a bound (None: no bound, so none beyond one),
    cannot claim a 99th percentile at 99% confidence (LoadGen's early stopping,
    stats.early_stopping_samples); None if they can."""
    needed = early_stopping_samples(overs or 0)
    if n >= needed:
        return None
    beyond = "" if overs is None else f", {overs} beyond the bound"
    return (
        f"{n} {what}{beyond}: a p99 at 99% confidence needs {needed} (MLPerf LoadGen's early "
        f"stopping), {needed - n} more: {fix}"
    )


UNRANKED = (Flag.CONTENDED, Flag.DRIFTING)
"""Flags that keep a run out of rankings and advice: its rate is not the platform's own."""


def unranked(result: Result) -> Flag | None:
    """The first of UNRANKED that the result breaks; None if none."""
    return next((flag for flag, _ in verdict(result) if flag in UNRANKED), None)


def flagged(result: Result, flag: Flag) -> bool:
    """Whether the result's own verdict raises `flag`."""
    return any(f is flag for f, _ in verdict(result))


def verdict_text(result: Result, repeats: Sequence[Result] = ()) -> str:
    """ "valid", or the flags that apply, comma separated."""
    flags = dict.fromkeys(flag for flag, _ in verdict(result, repeats))
    return ", ".join(flags) if flags else "valid"


class Repeat(Protocol):
    """A result, or what advice keeps of one (analysis.tally.Run)."""

    @property
    def items_per_s(self) -> float | None: ...
    @property
    def status(self) -> str: ...


def repeat_spread(repeats: Sequence[Repeat]) -> float | None:
    """Range of the repeats' throughputs as a percentage of their median; None for fewer than
    two measured repeats."""
    return spread_pct([r.items_per_s for r in repeats if r.items_per_s and r.status == "ok"])


def spread_pct(rates: Sequence[float]) -> float | None:
    """Range of the rates as a percentage of their median; None for fewer than two."""
    if len(rates) < 2:
        return None
    return 100 * (max(rates) - min(rates)) / statistics.median(rates)
