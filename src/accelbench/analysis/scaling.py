"""Scaling with replica count, as data: each multi-replica run against the one-replica run of its
cell (same micro batch, precision and platform; the accumulation may differ, as --global-batch
sets it). A speed-up is given only like with like: each replica with the torch threads the
one-replica run had (the binding is in the spec, so in the cell). torchrun gives each of several
CPU replicas one thread while a single process gets all cores, which made 2 replicas look 3.14x
as fast as one."""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.records.result import Result


@dataclass(frozen=True)
class Scaling:
    result: Result
    """The multi-replica run."""
    base: Result
    """The one-replica run of its cell."""

    @property
    def like_with_like(self) -> bool:
        return self.result.env.torch_num_threads == self.base.env.torch_num_threads

    @property
    def speedup(self) -> float | None:
        """Throughput at N replicas over throughput at 1; None unless like with like."""
        if not self.like_with_like:
            return None
        return (self.result.items_per_s or 0.0) / (self.base.items_per_s or 1.0)

    @property
    def efficiency(self) -> float | None:
        """The speed-up over N: 1 is linear scaling; above 1 means the one-replica run was held
        back or each replica's share fits a cache better, never a property of the platform."""
        return None if self.speedup is None else self.speedup / self.result.spec.replicas


@dataclass(frozen=True)
class CompilePayoff:
    """torch.compile against eager mode in the same cell on the same platform."""

    cost_ms: float
    """How much longer the compiled run's first step took (compilation inside)."""
    saved_ms: float
    """Median steady step time saved per step (negative: compiled is slower)."""

    @property
    def break_even_steps(self) -> float | None:
        """Steps after which compilation has paid for itself; None if it never does."""
        return max(self.cost_ms, 0.0) / self.saved_ms if self.saved_ms > 0 else None
