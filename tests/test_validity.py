from __future__ import annotations

from typing import Any

import pytest

from accelbench import report, validity
from accelbench.energy import EnergyMetrics
from accelbench.result import Result
from accelbench.runner import run
from accelbench.stats import summarize

from .conftest import tiny


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny(epochs=2, steps_per_epoch=12, window_steps=1, batch_size=8))


def varied(result: Result, spec: dict[str, Any] | None = None, **metrics: Any) -> Result:
    assert result.metrics is not None
    return result.model_copy(
        update={
            "spec": result.spec.model_copy(update=spec or {}),
            "metrics": result.metrics.model_copy(update=metrics),
        }
    )


STEADY_RATES = [100.0, 101, 99, 100, 100.5, 99.5, 100, 100]
STEADY = summarize(STEADY_RATES)  # known to +-1%


def two_repeats(measured: Result) -> tuple[Result, Result]:
    """Two repeats of one cell, each steady, the second 20% faster."""
    a = varied(measured, window_items_per_s=STEADY, input_wait_frac=0.0)
    faster = summarize([1.2 * x for x in STEADY_RATES])
    return a, varied(measured, {"repeat": 1}, window_items_per_s=faster, input_wait_frac=0.0)


def flags(result: Result, repeats: list[Result] | None = None) -> list[str]:
    return [flag for flag, _ in validity.verdict(result, repeats or [])]


def test_a_steady_long_enough_run_is_valid(measured: Result) -> None:
    good = varied(measured, window_items_per_s=STEADY, input_wait_frac=0.0)
    assert flags(good) == []
    assert validity.verdict_text(good) == "valid"


def test_too_few_windows(measured: Result) -> None:
    short = varied(measured, window_items_per_s=summarize([100.0, 101, 99]), input_wait_frac=0.0)
    assert flags(short) == ["too-short"]


def test_noisy_against_the_default_and_the_given_target(measured: Result) -> None:
    wide = summarize([60.0, 140, 80, 120, 100, 90, 110, 70])
    assert flags(varied(measured, window_items_per_s=wide, input_wait_frac=0.0)) == ["noisy"]
    tight = varied(measured, {"ci_pct": 0.5}, window_items_per_s=STEADY, input_wait_frac=0.0)
    assert flags(tight) == ["noisy"]  # +-1% is fine by default, not against a 0.5% target


def test_repeats_that_disagree_are_noisy(measured: Result) -> None:
    a, b = two_repeats(measured)
    groups = validity.repeat_groups([a, b])
    assert len(groups) == 1
    assert validity.siblings(a, groups) == [b]
    assert validity.repeat_spread([a, b]) == pytest.approx(100 * 20 / 110)
    assert flags(a, [b]) == ["noisy"]
    assert flags(a, [a.model_copy(update={"spec": b.spec})]) == []


def test_throttled_and_input_bound(measured: Result) -> None:
    hot = EnergyMetrics(
        method="nvml-energy-counter", scope="GPU 0 board", throttle_reasons=["hw-thermal"]
    )
    r = varied(measured, window_items_per_s=STEADY, energy=hot, input_wait_frac=0.4)
    assert flags(r) == ["throttled", "input-bound"]
    assert "40% of step time waiting for input" in dict(validity.verdict(r))["input-bound"]


def test_diverged_is_a_verdict_too(measured: Result) -> None:
    r = varied(measured, window_items_per_s=STEADY, input_wait_frac=0.0)
    r = r.model_copy(update={"status": "diverged", "reason": "loss became nan at step 3"})
    assert flags(r) == ["diverged"]


def test_table_and_notes_show_verdicts_and_repeat_spread(measured: Result) -> None:
    a, b = two_repeats(measured)
    lines = report.notes([a, b])
    assert any(
        "2 repeats, 100 120 items/s, spread 18.2%: noisy, target 5%" in line for line in lines
    )
    assert any(line.startswith("MFU peak: measured:") for line in lines)
    assert report.flat(a)["verdict"] == "valid"
