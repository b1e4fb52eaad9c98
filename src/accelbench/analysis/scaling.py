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

from accelbench.records.result import Result, cell_hash


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
    alone = cell_hash(result, ignore=("grad_accum",))
    if result.spec.replicas == 1 and result.spec.nodes == 1:
        base = alone  # its own one-replica cell: the same key, not made twice
    else:
        base = cell_hash(result, ignore=("grad_accum",), replicas=1, nodes=1)
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
    """Every multi-replica row with a measured one-replica row of its cell (the last, if its
    cell has several)."""
    bases = {r.alone: r for r in rows if _is_base(r)}
    return [pair for r in rows if (pair := _paired(r, bases)) is not None]


def _is_base(row: Scalable) -> bool:
    """Whether a row is what a multi-replica row of its cell may be paired with."""
    return row.replicas == 1 and bool(row.items_per_s) and row.status == "ok"


def _paired(row: S, bases: dict[str, S]) -> Pair[S] | None:
    if row.replicas > 1 and row.items_per_s and (base := bases.get(row.base)) is not None:
        return Pair(row, base)
    return None


class Pairing(Generic[S]):
    """pair_up over rows as they come, each with its number, holding only what pairs: each
    cell's base (the last) and the multi-replica rows. A site's rows are nearly all one-replica
    repeats: the CSV of a million of them, which held a Scale a row and their keys (merged),
    peaked at 437 MB, and at 105 MB without either."""

    def __init__(self) -> None:
        self._bases: dict[str, S] = {}
        self._multi: dict[int, S] = {}

    def add(self, number: int, row: S) -> None:
        if row.replicas > 1:
            self._multi[number] = row
        elif _is_base(row):
            self._bases[row.alone] = row

    def speedups(self) -> dict[int, Pair[S]]:
        """Each row's pair that gives a speed-up (like with like), by the row's number."""
        found = ((n, _paired(row, self._bases)) for n, row in self._multi.items())
        return {n: pair for n, pair in found if pair is not None and pair.speedup is not None}


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
