"""Scaling with replica count, as data: each multi-replica run against the one-replica run of its
cell (same micro batch, precision and platform; the accumulation may differ, as --global-batch
sets it). A speed-up is given only like with like: each replica with the torch threads the
one-replica run had (the binding is in the spec, so in the cell). torchrun gives each of several
CPU replicas one thread while a single process gets all cores, which made 2 replicas look 3.14x
as fast as one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.records.result import Result, cell_key


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


def scaling(results: Sequence[Result]) -> list[Scaling]:
    """Every multi-replica result with a measured one-replica run of its cell."""
    single = {
        cell_key(r, ignore=("grad_accum",)): r
        for r in results
        if r.spec.replicas == 1 and r.items_per_s and r.status == "ok"
    }
    found = []
    for r in results:
        base = single.get(cell_key(r, ignore=("grad_accum",), replicas=1, nodes=1))
        if r.spec.replicas > 1 and r.items_per_s and base is not None:
            found.append(Scaling(r, base))
    return found


@dataclass(frozen=True)
class CompilePayoff:
    """torch.compile against eager mode in the same cell on the same platform."""

    compiled: Result
    eager: Result

    @property
    def cost_ms(self) -> float:
        """How much longer the compiled run's first step took (compilation inside)."""
        assert self.compiled.metrics is not None and self.eager.metrics is not None
        return self.compiled.metrics.first_step_ms - self.eager.metrics.first_step_ms

    @property
    def saved_ms(self) -> float:
        """Median steady step time saved per step (negative: compiled is slower)."""
        assert self.compiled.metrics is not None and self.eager.metrics is not None
        return (
            self.eager.metrics.step_ms_steady.median - self.compiled.metrics.step_ms_steady.median
        )

    @property
    def break_even_steps(self) -> float | None:
        """Steps after which compilation has paid for itself; None if it never does."""
        return max(self.cost_ms, 0.0) / self.saved_ms if self.saved_ms > 0 else None


def compile_payoffs(results: Sequence[Result]) -> list[CompilePayoff]:
    """(compiled, eager) pairs of the same cell on the same platform, both measured."""
    eager = {cell_key(r): r for r in results if not r.spec.compile and r.metrics}
    pairs = [(r, eager.get(cell_key(r, compile=False))) for r in results]
    return [CompilePayoff(c, e) for c, e in pairs if c.spec.compile and c.metrics and e is not None]
