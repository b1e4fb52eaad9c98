"""A JAX device behind the engine seam (engines.Device)."""

from __future__ import annotations

from typing import Any

import jax

from accelbench.engines import LaggedTimer


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
        return LaggedTimer(jax.block_until_ready, self)

    def reset_peak_memory(self) -> None:
        """XLA keeps one peak per process and cannot reset it: the peak read is since start."""

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        stats = self.device.memory_stats() if self.type != "cpu" else None
        if not stats:
            return None, None
        gib = 2**30
        reserved = stats.get("pool_bytes") or stats.get("bytes_reserved")
        return stats["peak_bytes_in_use"] / gib, (reserved / gib if reserved else None)
