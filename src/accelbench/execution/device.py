"""What differs between torch's device types when timing: synchronisation, step timers, peak
memory; and a torch device behind the engine seam (engines.Device)."""

from __future__ import annotations

import itertools
import resource
from dataclasses import dataclass

import torch

from accelbench.engines import TimerMethod, WallTimer


def synchronize(device: torch.device) -> None:
    """Wait until all work queued on `device` has finished (no-op on the CPU, which is synchronous)."""
    if device.type != "cpu":
        torch.accelerator.synchronize(device)


class StepTimer:
    """Intervals between marks, without a host sync per step.

    On an accelerator each mark records a device event on the current stream, so the interval is
    the time the device took between two marks, including any time it waited for the host. On the
    CPU the work is done by the time the call returns, so the wall clock is exact.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.method: TimerMethod = "wall-clock" if device.type == "cpu" else "device-events"
        self._clock = WallTimer()
        self._events: list[torch.Event] = []

    def mark(self, pending: object = None) -> None:
        if self.method == "wall-clock":
            self._clock.mark()
            return
        event = torch.Event(device=self.device, enable_timing=True)
        event.record()
        self._events.append(event)

    def intervals_ms(self) -> list[float]:
        """Milliseconds between consecutive marks since the last call; synchronizes once."""
        if self.method == "wall-clock":
            return self._clock.intervals_ms()
        events, self._events = self._events, []
        synchronize(self.device)
        return [a.elapsed_time(b) for a, b in itertools.pairwise(events)]


@dataclass(frozen=True)
class TorchDevice:
    """A torch device as the engine seam takes it (engines.Device)."""

    device: torch.device

    @property
    def type(self) -> str:
        return self.device.type

    @property
    def index(self) -> int | None:
        return self.device.index

    def synchronize(self) -> None:
        synchronize(self.device)

    def timer(self) -> StepTimer:
        return StepTimer(self.device)

    def reset_peak_memory(self) -> None:
        reset_peak_memory(self.device)

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        return peak_memory_gib(self.device)


def reset_peak_memory(device: torch.device) -> None:
    if device.type != "cpu":
        torch.accelerator.reset_peak_memory_stats(device)


def peak_memory_gib(device: torch.device) -> tuple[float | None, float | None]:
    """(allocated, reserved) peaks of the device's caching allocator since the last reset."""
    if device.type == "cpu":
        return None, None
    gib = 2**30
    return (
        torch.accelerator.max_memory_allocated(device) / gib,
        torch.accelerator.max_memory_reserved(device) / gib,
    )


def host_peak_rss_gib() -> float:
    """Peak resident memory of this process and of its finished children (loader workers)."""
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    kib += resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return kib / 2**20
