"""Order statistics of raw samples: median, percentiles, spread, the median's confidence
interval, and where a series' warm-up ends."""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelbench.frozen import Frozen


class Summary(Frozen):
    """Percentiles of `n` samples (linear interpolation between order statistics)."""

    n: int
    median: float
    p25: float
    p75: float
    p90: float
    p99: float
    min: float
    max: float
    ci_low: float | None = None
    ci_high: float | None = None
    """Distribution-free 95% confidence interval of the median (None below 6 samples, where
    there is none); None in records made before it was computed."""

    @property
    def iqr_pct(self) -> float:
        """Interquartile range as a percentage of the median: the spread of the samples."""
        return 100 * (self.p75 - self.p25) / self.median if self.median else math.inf

    @property
    def ci_pct(self) -> float | None:
        """Half the width of the median's 95% interval, as a percentage of the median: how
        precisely the median is known."""
        if self.ci_low is None or self.ci_high is None or not self.median:
            return None
        return 100 * (self.ci_high - self.ci_low) / 2 / self.median


def percentile(sorted_samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted samples."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    position = (len(sorted_samples) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (position - low)


def median_ci(
    sorted_samples: Sequence[float], confidence: float = 0.95
) -> tuple[float, float] | None:
    """The order statistics that bracket the median with at least `confidence`, from the
    binomial distribution of how many samples fall below it; no assumption about their
    distribution. None when there are too few samples (fewer than 6 at 95%)."""
    n = len(sorted_samples)
    tail = (1 - confidence) / 2
    below, rank = 0.0, 0  # P(fewer than `rank` samples below the median) stays within the tail
    for k in range(n):
        below += math.comb(n, k) / 2**n
        if below > tail:
            break
        rank = k + 1
    if rank == 0:
        return None
    return sorted_samples[rank - 1], sorted_samples[n - rank]


def warmup_end(series: Sequence[float]) -> int:
    """Index of the first sample past the warm-up of a throughput series (a ramp, a step, a
    slow start: warm-up is slower than what follows).

    MSER (White, 1997, "An effective truncation heuristic for bias reduction in simulation
    output"): the truncation point d that minimises the standard error of the mean of what is
    left, sum((x_i - mean)^2 for i >= d) / (n - d)^2, searched over the first half of the series,
    kept only if the cut part is slower than the lower quartile of the rest.
    """
    n = len(series)
    if n < 4:
        return 0
    best, best_d = math.inf, 0
    for d in range(n // 2 + 1):
        rest = series[d:]
        mean = sum(rest) / len(rest)
        score = sum((x - mean) ** 2 for x in rest) / len(rest) ** 2
        if score < best:
            best, best_d = score, d
    if best_d == 0:
        return 0
    # On short noisy series MSER also cuts plain noise (over 40% of 10-sample normal series);
    # keep the cut only when what it cuts is slower than the lower quartile of what is left,
    # as warm-up is (about 16% of such series are still cut; see tests/test_stats.py).
    head = sum(series[:best_d]) / best_d
    return best_d if head < percentile(sorted(series[best_d:]), 25) else 0


def summarize(samples: Sequence[float]) -> Summary:
    s = sorted(samples)
    ci = median_ci(s)
    return Summary(
        n=len(s),
        median=percentile(s, 50),
        p25=percentile(s, 25),
        p75=percentile(s, 75),
        p90=percentile(s, 90),
        p99=percentile(s, 99),
        min=s[0],
        max=s[-1],
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
    )
