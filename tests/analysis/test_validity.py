from __future__ import annotations

from typing import Any

import pytest

from accelbench.analysis import validity
from accelbench.cell.runner import run
from accelbench.records.contention import HostActivity
from accelbench.records.energy import EnergyMetrics
from accelbench.records.metrics import Flops
from accelbench.records.result import Result
from accelbench.report import results as results_text
from accelbench.report import tabular

from ..conftest import rate, tiny


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny(epochs=2, steps_per_epoch=12, window_steps=1, batch_size=8))


def varied(result: Result, spec: dict[str, Any] | None = None, **metrics: Any) -> Result:
    assert result.metrics is not None
    return result.model_copy(
        update={
            "spec": result.spec.model_copy(update=spec or {}),
            "metrics": result.metrics.model_copy(update={"host": None} | metrics),
        }
    )


STEADY = rate(100.0, 0.01)  # known to +-1%


def two_repeats(measured: Result) -> tuple[Result, Result]:
    """Two repeats of one cell, each steady, the second 20% faster."""
    a = varied(measured, delivered=STEADY, input_wait_frac=0.0, flops=None)
    faster = rate(120.0, 0.01)
    return a, varied(measured, {"repeat": 1}, delivered=faster, input_wait_frac=0.0, flops=None)


def flags(result: Result, repeats: list[Result] | None = None) -> list[str]:
    return [flag for flag, _ in validity.verdict(result, repeats or [])]


def test_a_steady_long_enough_run_is_valid(measured: Result) -> None:
    good = varied(measured, delivered=STEADY, input_wait_frac=0.0)
    assert flags(good) == []
    assert validity.verdict_text(good) == "valid"


def test_too_few_windows(measured: Result) -> None:
    short = varied(measured, delivered=rate(100.0, None, blocks=3), input_wait_frac=0.0)
    assert flags(short) == ["too-short"]


def test_noisy_against_the_default_and_the_given_target(measured: Result) -> None:
    wide = rate(100.0, 0.2)
    assert flags(varied(measured, delivered=wide, input_wait_frac=0.0)) == ["noisy"]
    tight = varied(measured, {"ci_pct": 0.5}, delivered=STEADY, input_wait_frac=0.0)
    assert flags(tight) == ["noisy"]  # +-1% is fine by default, not against a 0.5% target


def test_repeats_that_disagree_are_noisy(measured: Result) -> None:
    a, b = two_repeats(measured)
    listing = results_text.listed([a, b])[0]
    assert len(listing.groups) == 1
    assert [listing.verdict_text(row) for row in listing.rows] == ["noisy", "noisy"]
    assert validity.repeat_spread([a, b]) == pytest.approx(100 * 20 / 110)
    assert flags(a, [b]) == ["noisy"]
    assert flags(a, [a.model_copy(update={"spec": b.spec})]) == []


def test_throttled_and_input_bound(measured: Result) -> None:
    hot = EnergyMetrics(
        method="nvml-energy-counter", scope="GPU 0 board", throttle_reasons=["hw-thermal"]
    )
    r = varied(measured, delivered=STEADY, energy=hot, input_wait_frac=0.4)
    assert flags(r) == ["throttled", "input-bound"]
    assert (
        "40% of step time waiting for input" in dict(validity.verdict(r))[validity.Flag.INPUT_BOUND]
    )


def test_a_power_cap_counts_only_below_the_boards_default(measured: Result) -> None:
    def capped(limit_w: float, default_w: float | None) -> Result:
        energy = EnergyMetrics(
            method="nvml-energy-counter",
            scope="GPU 0 board",
            power_limit_w=limit_w,
            default_power_limit_w=default_w,
            throttle_reasons=["sw-power-cap"],
        )
        return varied(measured, delivered=STEADY, energy=energy, input_wait_frac=0.0)

    assert flags(capped(700, 700)) == []  # an H200 under a large matmul: its rated power
    lowered = dict(validity.verdict(capped(400, 700)))[validity.Flag.THROTTLED]
    assert lowered == "device slowed down: sw-power-cap (limit 400 W, the board's default 700 W)"
    assert flags(capped(700, None)) == ["throttled"]  # a record from before: as it was judged


def test_diverged_is_a_verdict_too(measured: Result) -> None:
    r = varied(measured, delivered=STEADY, input_wait_frac=0.0)
    r = r.model_copy(update={"status": "diverged", "reason": "loss became nan at step 3"})
    assert flags(r) == ["diverged"]


def test_table_and_notes_show_verdicts_and_repeat_spread(measured: Result) -> None:
    a, b = two_repeats(measured)
    lines = results_text.notes([a, b])
    assert any(
        "2 repeats, 100 120 items/s, spread 18.2%: noisy, target 5%" in line for line in lines
    )
    assert tabular.flat(a)["verdict"] == "valid"


def quiet(**changes: Any) -> HostActivity:
    """A 2-CPU host whose cell needs both CPUs, measured for 5 s with nothing else running."""
    fields: dict[str, Any] = {
        "num_cpus": 2,
        "cell_cpus": 2.0,
        "busy_cpus": 1.9,
        "own_cpus": 1.85,
        "steal_frac": 0.0,
        "load_avg_start": 1.0,
        "load_avg_end": 2.0,
        "window_s": 5.0,
    }
    return HostActivity(**(fields | changes))


def test_other_work_on_the_host_is_contended(measured: Result) -> None:
    assert flags(varied(measured, delivered=STEADY, input_wait_frac=0.0, host=quiet())) == []
    # a second busy process took a whole CPU the cell needed
    busy = varied(
        measured, delivered=STEADY, input_wait_frac=0.0, host=quiet(busy_cpus=2.0, own_cpus=0.9)
    )
    assert flags(busy) == ["contended"]
    assert (
        "other processes kept 1.1 of 2 CPUs busy"
        in dict(validity.verdict(busy))[validity.Flag.CONTENDED]
    )
    # the same other work on a host with CPUs to spare is not contention
    spare = quiet(num_cpus=8, cell_cpus=2.0, busy_cpus=3.0, own_cpus=1.9)
    assert flags(varied(measured, delivered=STEADY, input_wait_frac=0.0, host=spare)) == []
    # a one-thread cell beside two spinners on two CPUs: fair shares keep the others within
    # the slack (1.33), yet the cell got two thirds of its CPU
    shared = quiet(cell_cpus=1.0, busy_cpus=2.0, own_cpus=0.67)
    assert flags(varied(measured, delivered=STEADY, input_wait_frac=0.0, host=shared)) == [
        "contended"
    ]
    # the same cell using its CPU whole beside one other process is not contention
    beside = quiet(cell_cpus=1.0, busy_cpus=2.0, own_cpus=0.95)
    assert flags(varied(measured, delivered=STEADY, input_wait_frac=0.0, host=beside)) == []


def test_steal_gpu_neighbours_and_short_windows(measured: Result) -> None:
    def why(host: HostActivity) -> str | None:
        return dict(validity.verdict(varied(measured, delivered=STEADY, host=host))).get(
            validity.Flag.CONTENDED
        )

    assert "stole 20% of CPU time" in (why(quiet(steal_frac=0.2)) or "")
    assert "other processes on the GPU (pid 4242)" in (why(quiet(other_gpu_pids=[4242])) or "")
    # CPU ticks are too coarse for a 0.2 s window: only a load above the CPUs counts there
    short = quiet(window_s=0.2, busy_cpus=2.0, own_cpus=0.1)
    assert why(short) is None
    assert "1-min load was 13.0 on 2 CPUs" in (
        why(short.model_copy(update={"load_avg_start": 13.0})) or ""
    )


def test_mfu_above_100_or_a_count_below_the_floor_is_implausible(measured: Result) -> None:
    fast = Flops(per_item=1e6, peak_per_s=1e6, peak_source="datasheet: x", floor_per_item=1e5)
    over = varied(measured, delivered=STEADY, input_wait_frac=0.0, flops=fast)
    assert over.metrics is not None and over.metrics.mfu == pytest.approx(100.0)
    assert flags(over) == ["implausible"]
    assert "MFU 10000% is above 100%" in dict(validity.verdict(over))[validity.Flag.IMPLAUSIBLE]
    # the encoder fast path: 640 FLOPs counted for a model whose weights need 14.7M
    missed = Flops(per_item=640, peak_per_s=None, peak_source="none", floor_per_item=14.7e6)
    r = varied(measured, delivered=STEADY, input_wait_frac=0.0, flops=missed)
    assert flags(r) == ["implausible"]
    assert (
        "below the weights' floor of 1.47e+07"
        in dict(validity.verdict(r))[validity.Flag.IMPLAUSIBLE]
    )
    ok = Flops(per_item=1e6, peak_per_s=1e12, peak_source="datasheet: x", floor_per_item=1e6)
    assert flags(varied(measured, delivered=STEADY, input_wait_frac=0.0, flops=ok)) == []


def test_a_steady_state_shorter_than_a_cpu_reading_is_never_valid(measured: Result) -> None:
    from accelbench.records.throughput import Delivered

    # 12 blocks of 100 items in 25 ms: a tight interval, but too short to judge contention.
    brief = Delivered(
        items_per_s=48_000.0,
        ci_low=47_900.0,
        ci_high=48_100.0,
        num_items=1200,
        time_s=0.025,
        block_items=[100] * 12,
        block_s=[0.025 / 12] * 12,
    )
    why = dict(validity.verdict(varied(measured, delivered=brief, input_wait_frac=0.0)))
    assert "lasted 0.025 s" in why[validity.Flag.TOO_SHORT]
    assert why[validity.Flag.TOO_SHORT].endswith(
        "give --min-steady-s 0.25 or more, or --max-measure-s more"
    )
    busy = HostActivity(
        num_cpus=2,
        cell_cpus=2,
        busy_cpus=2.0,
        own_cpus=2.19,  # what a 0.075 s window read
        steal_frac=0.0,
        load_avg_start=0.1,
        load_avg_end=0.1,
        window_s=0.075,
    )
    row = tabular.flat(varied(measured, delivered=brief, host=busy))
    assert row["others_cpus"] is None  # no CPU figure from a window the clock cannot resolve
