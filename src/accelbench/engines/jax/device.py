"""A JAX device behind the engine seam (engines.Device), and its step timer."""

from __future__ import annotations

import itertools
import time
from typing import Any

import jax

from accelbench.engines import TimerMethod


class LaggedTimer:
    """Intervals between the ends of consecutive steps, on the host's clock, with one step
    always queued: a mark waits for the step before the one just dispatched (JAX dispatches
    asynchronously, so the device never drains between steps), and `intervals_ms` waits for
    the last. The first interval runs from the window's first mark to its first step's end."""

    method: TimerMethod = "wall-clock"

    def __init__(self, device: JaxDevice) -> None:
        self.device = device
        self._times: list[float] = []
        self._pending: Any = None

    def mark(self, pending: object = None) -> None:
        if pending is None:  # a window's first mark: nothing queued yet
            self._times.append(time.perf_counter())
            return
        if self._pending is not None:
            jax.block_until_ready(self._pending)
            self._times.append(time.perf_counter())
        self._pending = self.device.latest = pending

    def intervals_ms(self) -> list[float]:
        if self._pending is not None:
            jax.block_until_ready(self._pending)
            self._times.append(time.perf_counter())
            self._pending = None
        times, self._times = self._times, []
        return [(b - a) * 1e3 for a, b in itertools.pairwise(times)]


class JaxDevice:
    """One of JAX's devices: "cpu", or "cuda" for its GPU backend."""

    def __init__(self, device_type: str) -> None:
        platform = "gpu" if device_type == "cuda" else device_type
        self.device = jax.devices(platform)[0]
        self.type, self.index = device_type, (self.device.id if device_type != "cpu" else None)
        self.latest: Any = None
        """The output of the last step dispatched, which synchronize() waits for."""

    def put(self, tree: Any) -> Any:
        return jax.device_put(tree, self.device)

    def synchronize(self) -> None:
        """Waits for the last step dispatched (JAX has no wait for a whole device: a step's
        output is ready once the step, and every one before it that it reads, has run)."""
        if self.latest is not None:
            jax.block_until_ready(self.latest)

    def timer(self) -> LaggedTimer:
        return LaggedTimer(self)

    def reset_peak_memory(self) -> None:
        """XLA keeps one peak per process and cannot reset it: the peak read is since start."""

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        stats = self.device.memory_stats() if self.type != "cpu" else None
        if not stats:
            return None, None
        gib = 2**30
        reserved = stats.get("pool_bytes") or stats.get("bytes_reserved")
        return stats["peak_bytes_in_use"] / gib, (reserved / gib if reserved else None)
