"""Order statistics of raw samples: median, percentiles and spread."""

from __future__ import annotations

import math
from collections.abc import Sequence

from accelbench.spec import Frozen


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

    @property
    def iqr_pct(self) -> float:
        """Interquartile range as a percentage of the median: the spread a table shows."""
        return 100 * (self.p75 - self.p25) / self.median if self.median else math.inf


def percentile(sorted_samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted samples."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    position = (len(sorted_samples) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(sorted_samples) - 1)
    return sorted_samples[low] + (sorted_samples[high] - sorted_samples[low]) * (position - low)


def summarize(samples: Sequence[float]) -> Summary:
    s = sorted(samples)
    return Summary(
        n=len(s),
        median=percentile(s, 50),
        p25=percentile(s, 25),
        p75=percentile(s, 75),
        p90=percentile(s, 90),
        p99=percentile(s, 99),
        min=s[0],
        max=s[-1],
    )
