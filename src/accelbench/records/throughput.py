"""The headline number: delivered throughput, items over seconds across the steady state.

Its seconds are all the steady state took, input waits, host work between steps or batches and
epoch boundaries included, so it is what a user gets from the epoch times: the steady epochs'
items over their seconds. Its 95% interval comes from batch means (Schmeiser, 1982, "Batch size
effects in the analysis of simulation output", Operations Research 30(3)): the steady steps are
cut into at most MAX_BLOCKS contiguous blocks, long enough that their means are nearly
independent even when neighbouring steps are not (a stall, a clock ramp), and a Student t
interval of the mean time per item, a ratio estimate over the blocks, is turned into rates. It
is centred on the delivered rate, so it contains it by construction.

Nothing here imports torch: stored records are upgraded with it (result.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

from pydantic import Field

from accelbench.records.frozen import Frozen

MAX_BLOCKS = 20
"""Schmeiser (1982) finds 10 to 30 batches a good trade between the interval's width and its
coverage when samples are correlated."""
MIN_BLOCKS = 6
"""Fewer blocks give an interval too wide to judge anything by."""

T_975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
)
"""Student's t 0.975 quantiles for 1 to 29 degrees of freedom (any statistics table)."""


class Delivered(Frozen):
    """Items over seconds across the steady state, with its 95% interval."""

    items_per_s: float = Field(ge=0)
    ci_low: float | None
    ci_high: float | None
    """Batch-means 95% interval (None below MIN_BLOCKS blocks, or when it is unbounded)."""
    num_items: int = Field(ge=0)
    time_s: float = Field(ge=0)
    """Wall time of the steady state: items_per_s = num_items / time_s."""
    block_items: list[int]
    block_s: list[float]
    """The contiguous blocks the interval is computed from; they add up to the totals."""

    @property
    def ci_pct(self) -> float | None:
        """Half the interval's width as a percentage of the rate: how precisely it is known."""
        if self.ci_low is None or self.ci_high is None or not self.items_per_s:
            return None
        return 100 * (self.ci_high - self.ci_low) / 2 / self.items_per_s


def wall_ms(
    step_ms: Sequence[float], epoch_s: Sequence[float], steps_per_epoch: int
) -> list[float]:
    """Each step's share of the wall clock: its own time, and for an epoch's first step also
    whatever of the epoch no step's time covers (the loader's first batch, reading losses back),
    so that an epoch's steps add up to the epoch's time."""
    out = list(step_ms)
    for index, seconds in enumerate(epoch_s):
        first = index * steps_per_epoch
        if first >= len(out):
            break
        covered = sum(out[first : first + steps_per_epoch])
        out[first] += max(0.0, seconds * 1e3 - covered)
    return out


def delivered(wall: Sequence[float], items_per_step: int) -> Delivered:
    """The delivered rate of steps taking `wall` milliseconds each, and its interval."""
    n = len(wall)
    if n == 0:
        raise ValueError("no steady steps to measure a rate over")
    k = min(MAX_BLOCKS, n)
    sizes = [n // k + (j < n % k) for j in range(k)]
    block_s, start = [], 0
    for size in sizes:
        block_s.append(sum(wall[start : start + size]) / 1e3)
        start += size
    block_items = [size * items_per_step for size in sizes]
    num_items, time_s = sum(block_items), sum(block_s)
    ci = interval(block_items, block_s)
    return Delivered(
        items_per_s=num_items / time_s,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        num_items=num_items,
        time_s=time_s,
        block_items=block_items,
        block_s=block_s,
    )


def interval(block_items: Sequence[int], block_s: Sequence[float]) -> tuple[float, float] | None:
    """95% interval of total items over total seconds from contiguous blocks: a t interval of
    the seconds per item (the ratio estimator's linearised standard error, Cochran, "Sampling
    Techniques", 6.3), inverted into rates. None below MIN_BLOCKS blocks or when unbounded."""
    k = len(block_s)
    if k < MIN_BLOCKS:
        return None
    per_item = sum(block_s) / sum(block_items)
    residuals = [s - per_item * x for x, s in zip(block_items, block_s, strict=True)]
    mean_items = sum(block_items) / k
    se = math.sqrt(sum(e * e for e in residuals) / (k * (k - 1))) / mean_items
    half = T_975[k - 2] * se
    if per_item - half <= 0:
        return None
    return 1 / (per_item + half), 1 / (per_item - half)


class Trend(NamedTuple):
    """A monotone trend of the block rates across the steady state: how large, how sure."""

    change_pct: float
    """The rate's change over the whole window (Theil-Sen slope of the block rates times their
    span), in percent of their median."""
    per_min_pct: float
    """The same change per minute of the window."""
    first: float
    last: float
    """Items per second over the window's first and last fifth of blocks."""
    p: float
    """Mann-Kendall's two-sided p-value: the chance of so ordered a series were it stationary."""


def trend(d: Delivered) -> Trend | None:
    """The block rates' trend (Mann, 1945; Kendall, 1975; Sen, 1968): the batch-means interval
    holds for a stationary series only, and a rate that rises or falls through the window (a
    clock that ramps, a cache or a leak that grows, throttling) is not one. The blocks' means are
    nearly independent where steps are not (the module's docstring), as the test assumes.
    None below MIN_BLOCKS blocks."""
    rates = [x / s for x, s in zip(d.block_items, d.block_s, strict=True) if s > 0]
    k = len(rates)
    if k < MIN_BLOCKS:
        return None
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    score = sum((rates[j] > rates[i]) - (rates[j] < rates[i]) for i, j in pairs)
    sd = math.sqrt(k * (k - 1) * (2 * k + 5) / 18)  # under no trend, ties aside
    z = (score - math.copysign(1, score)) / sd if score else 0.0  # continuity corrected
    slope = statistics.median((rates[j] - rates[i]) / (j - i) for i, j in pairs)
    change_pct = 100 * slope * (k - 1) / statistics.median(rates)
    fifth = max(1, k // 5)
    return Trend(
        change_pct=change_pct,
        per_min_pct=change_pct / (d.time_s / 60) if d.time_s > 0 else 0.0,
        first=sum(d.block_items[:fifth]) / sum(d.block_s[:fifth]),
        last=sum(d.block_items[-fifth:]) / sum(d.block_s[-fifth:]),
        p=math.erfc(abs(z) / math.sqrt(2)),
    )
