"""Order statistics of raw samples: median, percentiles, spread, the median's confidence
interval, and where a series' warm-up ends."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from accelbench.records.frozen import Frozen


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
    log_all = math.lgamma(n + 1) - n * math.log(2)  # in log space: C(n, k) / 2^n underflows
    for k in range(n):
        below += math.exp(log_all - math.lgamma(k + 1) - math.lgamma(n - k + 1))
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
    # Sums over each tail series[d:], from the end: linear, where a sum per cut was quadratic
    # (30,000 steps took two minutes).
    centre = sum(series) / n  # shifted by the mean, so that the sums of squares keep precision
    tails, total, squares = [(0.0, 0.0)] * (n + 1), 0.0, 0.0
    for i in range(n - 1, -1, -1):
        x = series[i] - centre
        total, squares = total + x, squares + x * x
        tails[i] = (total, squares)
    best, best_d = math.inf, 0
    for d in range(n // 2 + 1):
        total, squares = tails[d]
        m = n - d
        score = max(0.0, squares - total * total / m) / m**2
        if score < best:
            best, best_d = score, d
    if best_d == 0:
        return 0
    # On short noisy series MSER also cuts plain noise (over 40% of 10-sample normal series);
    # keep the cut only when what it cuts is slower than the lower quartile of what is left,
    # as warm-up is (about 16% of such series are still cut; see tests/records/test_stats.py).
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


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(at most k successes in n trials of probability p), summed in log space."""
    if p <= 0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    return min(
        1.0,
        sum(
            math.exp(
                math.lgamma(n + 1)
                - math.lgamma(i + 1)
                - math.lgamma(n - i + 1)
                + i * log_p
                + (n - i) * log_q
            )
            for i in range(min(k, n) + 1)
        ),
    )


@functools.cache  # a few distinct arguments, asked for by every inference result's verdict
def early_stopping_samples(overs: int, percentile: float = 0.99, confidence: float = 0.99) -> int:
    """MLPerf LoadGen's early stopping (loadgen/early_stopping.cc in mlcommons/inference): the
    fewest samples, `overs` of them beyond a bound, for "the `percentile` is within the bound"
    to hold at `confidence`: the smallest n at which a system whose share beyond the bound is
    1 - percentile would show at most `overs` beyond with probability 1 - confidence or less.
    459 samples with none beyond, 662 with one, at the 99th percentile and 99% confidence."""
    tail, alpha = 1 - percentile, 1 - confidence
    low, high = overs, max(overs + 1, 16)
    while binomial_cdf(overs, high, tail) > alpha:  # the CDF falls as n grows: double, bisect
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if binomial_cdf(overs, mid, tail) > alpha else (low, mid)
    return high


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95% score interval of a share k / n (good near 0 and 1, where the normal
    approximation is not)."""
    if n == 0:
        return 0.0, 1.0
    share = k / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
