"""Whether a result can be trusted, and why not: a verdict that every table shows.

Rules, each with its reason (a result may break several):
- diverged: the loss became NaN or infinite (time-to-train: or ran away);
- not-converged: time-to-train's budget ended before its target;
- too-short: too few steady-state windows for a 95% interval of the median, or, when inferring,
  too few batches for a p99 latency;
- noisy: the median's interval is wider than the target (spec.ci_pct, else NOISY_PCT), or
  repeats of the cell in fresh processes differ by more than that;
- throttled: NVML reported a power or thermal slowdown during the measured window;
- input-bound: the training loop waited for input for more than INPUT_BOUND_FRAC of the time;
- server: too-slow (no rate tried kept p99 within the bound), too-short (too few queries for a
  p99), overloaded (answered less than OVERLOAD_FRAC of the target rate).
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence

from accelbench.result import Result, ServerMetrics

NOISY_PCT = 5.0
"""Without a target, a median known only to within more than +-5% is noisy."""
MIN_WINDOWS = 6
"""The fewest samples that give a distribution-free 95% interval of the median."""
INPUT_BOUND_FRAC = 0.10
MIN_P99_SAMPLES = 100
"""Latencies below which a p99 is not meaningful: at least one must lie beyond it (MLPerf's
LoadGen likewise refuses a run too short for the percentile it reports)."""


def verdict(result: Result, repeats: Sequence[Result] = ()) -> list[tuple[str, str]]:
    """(flag, reason) for each rule the result breaks; empty means valid. `repeats` are the
    results of the same cell's other repeats (see `repeat_groups`)."""
    m, spec = result.metrics, result.spec
    flags: list[tuple[str, str]] = []
    if result.status in ("diverged", "not-converged"):
        flags.append((result.status, result.reason or "the loss became NaN or infinite"))
    if m is None:
        return flags
    target = spec.ci_pct or NOISY_PCT
    windows = m.window_items_per_s
    if windows.n < MIN_WINDOWS:
        flags.append(
            (
                "too-short",
                f"{windows.n} steady windows; {MIN_WINDOWS} give a 95% interval: run more steps",
            )
        )
    elif spec.scenario == "infer" and m.step_ms_steady.n < MIN_P99_SAMPLES:
        flags.append(
            (
                "too-short",
                f"{m.step_ms_steady.n} steady batches; p99 latency needs {MIN_P99_SAMPLES}: "
                "run more steps",
            )
        )
    elif (windows.ci_pct or 0) > target:
        flags.append(("noisy", f"median known to +-{windows.ci_pct:.1f}%, target +-{target:g}%"))
    spread = repeat_spread([result, *repeats])
    if spread is not None and spread > target:
        flags.append(
            ("noisy", f"{len(repeats) + 1} repeats differ by {spread:.1f}%, target {target:g}%")
        )
    if m.server is not None:
        flags += _server_flags(m.server)
    if m.energy is not None and m.energy.throttled:
        flags.append(("throttled", "device slowed down: " + ", ".join(m.energy.throttle_reasons)))
    if m.input_wait_frac is not None and m.input_wait_frac > INPUT_BOUND_FRAC:
        flags.append(
            (
                "input-bound",
                f"{100 * m.input_wait_frac:.0f}% of step time waiting for input: add --workers",
            )
        )
    return flags


OVERLOAD_FRAC = 0.9
"""A server trial answering less than this share of its target rate did not keep up."""


def _server_flags(server: ServerMetrics) -> list[tuple[str, str]]:
    if server.reported is None:
        return [("too-slow", f"no rate tried kept p99 within {server.latency_bound_ms:g} ms")]
    trial = server.trials[server.reported]
    flags = []
    if trial.latency.n < MIN_P99_SAMPLES:
        flags.append(
            (
                "too-short",
                f"{trial.latency.n} queries; p99 needs {MIN_P99_SAMPLES}: raise --num-queries",
            )
        )
    if trial.achieved_per_s < OVERLOAD_FRAC * trial.target_per_s:
        flags.append(
            (
                "overloaded",
                f"answered {trial.achieved_per_s:.4g} of {trial.target_per_s:.4g} queries/s",
            )
        )
    return flags


def verdict_text(result: Result, repeats: Sequence[Result] = ()) -> str:
    """ "valid", or the flags that apply, comma separated."""
    flags = dict.fromkeys(flag for flag, _ in verdict(result, repeats))
    return ", ".join(flags) if flags else "valid"


def cell_key(result: Result, **fields: object) -> str:
    """The result's cell and platform, without its repeat index and with `fields` replaced: the
    same key for every repeat of a cell, and for cells that differ only in `fields`."""
    cell = result.spec.model_dump(mode="json") | fields
    del cell["repeat"]
    return json.dumps([cell, result.env.fingerprint()], sort_keys=True)


def repeat_groups(results: Sequence[Result]) -> dict[str, list[Result]]:
    """Results grouped by cell_key: the repeats of each cell."""
    groups: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        groups[cell_key(r)].append(r)
    return groups


def siblings(result: Result, groups: dict[str, list[Result]]) -> list[Result]:
    """The other repeats of `result`'s cell."""
    for members in groups.values():
        if any(m is result for m in members):
            return [m for m in members if m is not result]
    return []


def repeat_spread(repeats: Sequence[Result]) -> float | None:
    """Range of the repeats' median throughputs as a percentage of their median; None for
    fewer than two measured repeats."""
    rates = [r.metrics.items_per_s for r in repeats if r.metrics and r.status == "ok"]
    if len(rates) < 2:
        return None
    return 100 * (max(rates) - min(rates)) / statistics.median(rates)
