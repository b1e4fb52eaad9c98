from __future__ import annotations

import pytest

from accelbench.stats import percentile, summarize


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
