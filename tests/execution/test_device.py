from __future__ import annotations

import time

import torch

from accelbench.execution.device import StepTimer, host_peak_rss_gib, peak_memory_gib

from ..conftest import needs_cuda


def test_wall_clock_timer_on_cpu() -> None:
    timer = StepTimer(torch.device("cpu"))
    timer.mark()
    for _ in range(3):
        time.sleep(0.01)
        timer.mark()
    intervals = timer.intervals_ms()
    assert len(intervals) == 3
    assert all(9 < ms < 200 for ms in intervals)
    assert timer.intervals_ms() == []  # collected intervals are not returned twice


def test_cpu_has_no_device_memory_but_host_rss() -> None:
    assert peak_memory_gib(torch.device("cpu")) == (None, None)
    assert 0.01 < host_peak_rss_gib() < 64


@needs_cuda
def test_event_timer_measures_device_work() -> None:
    device = torch.device("cuda")
    timer = StepTimer(device)
    assert timer.method == "device-events"
    x = torch.randn(4096, 4096, device=device)
    timer.mark()
    for _ in range(3):
        x @ x
        timer.mark()
    intervals = timer.intervals_ms()
    assert len(intervals) == 3 and all(ms > 0 for ms in intervals)
    allocated, reserved = peak_memory_gib(device)
    assert allocated is not None and reserved is not None and reserved >= allocated > 0
