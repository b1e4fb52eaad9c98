"""A JAX device behind the engine seam (engines.Device)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from accelbench.engines import LaggedDevice


class JaxDevice(LaggedDevice):
    """One of JAX's devices: "cpu", or "cuda" for its GPU backend; with `replicas`, this
    process's device among the replicas' (jax.distributed joined), each holding the parameters
    and its part of the global batch."""

    def __init__(self, device_type: str, replicas: int = 1) -> None:
        platform = "gpu" if device_type == "cuda" else device_type
        self.device = jax.local_devices(backend=platform)[0]
        # The board's index on this host, which NVML reads: a replica's global id is not it.
        board = getattr(self.device, "local_hardware_id", None)
        self.type = device_type
        self.index = None if device_type == "cpu" else (self.device.id if board is None else board)
        self.mesh = Mesh(np.array(jax.devices(platform)), ("data",)) if replicas > 1 else None

    def put(self, tree: Any) -> Any:
        """The same values on every replica (parameters, optimizer state), or on this device."""
        if self.mesh is None:
            return jax.device_put(tree, self.device)
        return self._global(tree, PartitionSpec())

    def shard(self, batch: Any) -> Any:
        """This replica's batch as its part of the global batch (as it is, with one replica)."""
        return batch if self.mesh is None else self._global(batch, PartitionSpec("data"))

    def _global(self, tree: Any, spec: PartitionSpec) -> Any:
        assert self.mesh is not None
        sharding = NamedSharding(self.mesh, spec)

        def one(a: Any) -> Any:
            if isinstance(a, jax.Array) and not a.is_fully_addressable:
                return a  # made on every replica already (an optimizer's state of its params)
            return jax.make_array_from_process_local_data(sharding, np.asarray(a))

        return jax.tree.map(one, tree)

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
