from __future__ import annotations

import math
import random

import pytest

from accelbench.analysis import validity
from accelbench.records import throughput
from accelbench.records.stats import median_ci, percentile, summarize, warmup_end


def test_percentiles_interpolate_linearly() -> None:
    samples = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile(samples, 50) == 3.0
    assert percentile(samples, 25) == 2.0
    assert percentile(samples, 90) == pytest.approx(4.6)
    assert percentile([7.0], 99) == 7.0


def test_summary_of_unsorted_samples() -> None:
    s = summarize([10.0, 30.0, 20.0, 40.0])
    assert (s.n, s.median, s.min, s.max) == (4, 25.0, 10.0, 40.0)
    assert s.p25 == pytest.approx(17.5)
    assert s.iqr_pct == pytest.approx(100 * (32.5 - 17.5) / 25)


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError):
        summarize([])


def test_median_interval_from_order_statistics() -> None:
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is None  # 5 samples cannot give 95%
    assert median_ci([float(i) for i in range(6)]) == (0.0, 5.0)  # P = 1 - 2/64 = 96.9%
    lo, hi = median_ci([float(i) for i in range(100)]) or (0, 0)
    assert (lo, hi) == (39.0, 60.0)  # the textbook ranks 40 and 61 (1-based) for n = 100


def test_median_interval_covers_the_true_median() -> None:
    rng = random.Random(1)
    trials, covered = 400, 0
    for _ in range(trials):
        samples = sorted(rng.gauss(10, 1) for _ in range(30))
        lo, hi = median_ci(samples) or (math.inf, -math.inf)
        covered += lo <= 10 <= hi
    assert 0.93 <= covered / trials <= 0.995


def test_summary_carries_the_interval() -> None:
    s = summarize([100.0 + i for i in range(10)])
    assert s.ci_low is not None and s.ci_low < s.median < (s.ci_high or 0)
    assert s.ci_pct == pytest.approx(100 * ((s.ci_high or 0) - s.ci_low) / 2 / s.median)
    assert summarize([1.0, 2.0]).ci_pct is None


@pytest.mark.parametrize(
    ("series", "end"),
    [
        ([10.0, 40.0, 70.0, 90.0] + [100.0] * 12, 4),  # a ramp (clocks, caches)
        ([20.0] * 3 + [100.0] * 13, 3),  # a step (autotuning done)
        ([100.0] * 16, 0),  # steady from the start
    ],
)
def test_warmup_end_finds_ramps_and_steps(series: list[float], end: int) -> None:
    assert warmup_end(series) == end


def test_warmup_end_keeps_most_of_a_noisy_steady_series() -> None:
    rng = random.Random(0)
    noisy = [100 + rng.gauss(0, 3) for _ in range(40)]
    ramped = [50.0, 70.0, 85.0, *noisy]
    assert warmup_end(noisy) <= 10
    assert 3 <= warmup_end(ramped) <= 13


def test_warmup_end_rarely_cuts_plain_noise_and_finds_mild_ramps() -> None:
    rng = random.Random(3)
    noise = [[100 + rng.gauss(0, 5) for _ in range(10)] for _ in range(500)]
    ramps = [[85.0, 92.0] + [100 + rng.gauss(0, 3) for _ in range(10)] for _ in range(200)]
    assert sum(warmup_end(s) > 0 for s in noise) / len(noise) < 0.25  # plain MSER: over 0.4
    assert sum(warmup_end(s) >= 2 for s in ramps) / len(ramps) > 0.9


def test_early_stopping_reproduces_loadgens_sample_counts() -> None:
    # MLPerf LoadGen's early stopping at the 99th percentile and 99% confidence: 459 samples
    # with none beyond the bound, 662 with one.
    from accelbench.records.stats import binomial_cdf, early_stopping_samples

    assert early_stopping_samples(0) == 459 and early_stopping_samples(1) == 662
    assert binomial_cdf(0, 459, 0.01) <= 0.01 < binomial_cdf(0, 458, 0.01)
    assert early_stopping_samples(0, percentile=0.9, confidence=0.99) == 44  # 0.9^44 < 0.01


def test_the_linear_warmup_and_median_interval_equal_their_definitions() -> None:
    # The definitions, a sum per cut and a binomial term per rank (quadratic: 30,000 steps took
    # two minutes), against the linear code on seeded series with and without a slow start.
    import math
    import random

    from accelbench.records.stats import median_ci, percentile, warmup_end

    def mser(series: list[float]) -> int:
        n = len(series)
        if n < 4:
            return 0
        scores = []
        for d in range(n // 2 + 1):
            rest = series[d:]
            mean = sum(rest) / len(rest)
            scores.append(sum((x - mean) ** 2 for x in rest) / len(rest) ** 2)
        d = scores.index(min(scores))
        cut = d and sum(series[:d]) / d < percentile(sorted(series[d:]), 25)
        return d if cut else 0

    def bracket(s: list[float]) -> tuple[float, float] | None:
        n, below, rank = len(s), 0.0, 0
        for k in range(n):
            below += math.comb(n, k) / 2**n
            if below > 0.025:
                break
            rank = k + 1
        return (s[rank - 1], s[n - rank]) if rank else None

    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 200)
        slow = rng.randint(0, n // 4)
        series = [rng.gauss(100, 5) - (40 if i < slow else 0) for i in range(n)]
        assert warmup_end(series) == mser(series)
        assert median_ci(sorted(series)) == bracket(sorted(series))


def _ar1_steps(rng: random.Random, n: int, phi: float = 0.7, sd: float = 0.05) -> list[float]:
    """Step times (ms) around 10 ms with AR(1) noise: correlated, and stationary."""
    noise, out = 0.0, []
    for _ in range(n):
        noise = phi * noise + rng.gauss(0, sd * math.sqrt(1 - phi * phi))
        out.append(10.0 * (1 + noise))
    return out


def test_a_stationary_correlated_series_is_rarely_called_drifting() -> None:
    rng = random.Random(7)
    flagged = sum(
        validity.drifting(throughput.delivered(_ar1_steps(rng, 400), 32), 5.0) is not None
        for _ in range(300)
    )
    assert flagged <= 6  # 2% of runs at most; about 1% expected at p < 0.01


def test_a_rate_that_falls_ten_percent_through_the_window_is_drifting() -> None:
    rng = random.Random(11)
    found = []
    for _ in range(100):
        steps = _ar1_steps(rng, 400)
        slowed = [t / (1 - 0.10 * i / 399) for i, t in enumerate(steps)]  # rate 10% lower at end
        found.append(validity.drifting(throughput.delivered(slowed, 32), 5.0))
    assert sum(f is not None for f in found) >= 95
    why = next(f for f in found if f)
    assert "first fifth" in why and "% a minute" in why and why.startswith("the rate moved -")


def test_the_trend_of_a_constructed_series_is_its_slope() -> None:
    ramp = throughput.delivered([10.0 * (1 + 0.001 * i) for i in range(200)], 10)
    t = throughput.trend(ramp)
    assert t is not None and t.p < 1e-6 and -25 < t.change_pct < -15 and t.first > t.last
    flat = throughput.trend(throughput.delivered([10.0] * 200, 10))
    assert flat is not None and flat.p == 1.0 and flat.change_pct == 0.0
