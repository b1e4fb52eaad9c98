"""Scaling with replica count, as data: each multi-replica run against the one-replica run of its
cell (same micro batch, precision and platform; the accumulation may differ, as --global-batch
sets it). A speed-up is given only like with like: each replica with the torch threads the
one-replica run had (the binding is in the spec, so in the cell). torchrun gives each of several
CPU replicas one thread while a single process gets all cores, which made 2 replicas look 3.14x
as fast as one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from accelbench.records.result import Result, cell_key
from accelbench.records.spec import stable_hash


class Scalable(Protocol):
    """A result, or what is kept of one (report.listing.Listing, Scale), that can be paired
    with the one-replica result of its cell."""

    @property
    def alone(self) -> str:
        """Its cell with any accumulation: what a multi-replica result's `base` names."""
        ...

    @property
    def base(self) -> str:
        """Its one-replica cell, with any accumulation."""
        ...

    @property
    def replicas(self) -> int: ...
    @property
    def items_per_s(self) -> float | None: ...
    @property
    def status(self) -> str: ...
    @property
    def threads(self) -> int: ...


S = TypeVar("S", bound=Scalable)


@dataclass(frozen=True, slots=True)
class Scale:
    """What pairing a result with the one-replica result of its cell needs of it."""

    alone: str
    base: str
    replicas: int
    items_per_s: float | None
    status: str
    threads: int


def scale(result: Result) -> Scale:
    alone = stable_hash(cell_key(result, ignore=("grad_accum",)))
    if result.spec.replicas == 1 and result.spec.nodes == 1:
        base = alone  # its own one-replica cell: the same key, not made twice
    else:
        base = stable_hash(cell_key(result, ignore=("grad_accum",), replicas=1, nodes=1))
    return Scale(
        alone=alone,
        base=base,
        replicas=result.spec.replicas,
        items_per_s=result.items_per_s,
        status=result.status,
        threads=result.env.torch_num_threads,
    )


@dataclass(frozen=True)
class Pair(Generic[S]):
    """A multi-replica result and the one-replica result of its cell."""

    row: S
    base: S

    @property
    def speedup(self) -> float | None:
        """Throughput at N replicas over throughput at 1; None unless like with like."""
        if self.row.threads != self.base.threads:
            return None
        return (self.row.items_per_s or 0.0) / (self.base.items_per_s or 1.0)

    @property
    def efficiency(self) -> float | None:
        """The speed-up over N: 1 is linear scaling; above 1 means the one-replica run was held
        back or each replica's share fits a cache better, never a property of the platform."""
        return None if self.speedup is None else self.speedup / self.row.replicas


def pair_up(rows: Sequence[S]) -> list[Pair[S]]:
    """Every multi-replica row with a measured one-replica row of its cell."""
    single = {r.alone: r for r in rows if r.replicas == 1 and r.items_per_s and r.status == "ok"}
    return [
        Pair(r, base)
        for r in rows
        if r.replicas > 1 and r.items_per_s and (base := single.get(r.base)) is not None
    ]


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
