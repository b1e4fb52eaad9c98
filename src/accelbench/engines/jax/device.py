"""A JAX device behind the engine seam (engines.Device)."""

from __future__ import annotations

from typing import Any

import jax

from accelbench.engines import LaggedDevice


class JaxDevice(LaggedDevice):
    """One of JAX's devices: "cpu", or "cuda" for its GPU backend."""

    def __init__(self, device_type: str) -> None:
        platform = "gpu" if device_type == "cuda" else device_type
        self.device = jax.devices(platform)[0]
        self.type, self.index = device_type, (self.device.id if device_type != "cpu" else None)

    def put(self, tree: Any) -> Any:
        return jax.device_put(tree, self.device)

    def wait(self, output: Any) -> None:
        jax.block_until_ready(output)

    def reset_peak_memory(self) -> None:
        """XLA keeps one peak per process and cannot reset it: the peak read is since start."""

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        stats = self.device.memory_stats() if self.type != "cpu" else None
        if not stats:
            return None, None
        gib = 2**30
        reserved = stats.get("pool_bytes") or stats.get("bytes_reserved")
        return stats["peak_bytes_in_use"] / gib, (reserved / gib if reserved else None)
