"""Fleet outliers: among the nodes of one platform that ran the same cell, the nodes whose rate
lies outside the fleet's spread, as a centre finds the one slow node among many (Microsoft
SuperBench builds its baselines from the fleet itself).

The spread is robust: one slow node drags a mean and a standard deviation towards itself, but
not the median nor the median absolute deviation (MAD). A node's rate for a cell is the median
of its measured repeats; its modified z-score is 0.6745 (rate - fleet median) / MAD, and a node
with |z| above 3.5 is an outlier (Iglewicz and Hoaglin, "How to Detect and Handle Outliers",
1993, who derive both numbers). The MAD is taken as at least 1% of the median, so that a fleet
of nearly equal nodes does not call a node 1% off an outlier: with that floor a node must lie
at least 5.2% from the median, close to the "> 95% baseline performance" that NVIDIA asks of
an Exemplar cloud (github.com/NVIDIA/dgxc-benchmarking, Exemplar_validation.md). A cell needs results from MIN_NODES nodes to be judged; results measured while
other work shared the host (contended) are left out, as their rate is not the node's.

With one run a node, that is all a fleet can do: its spread between nodes is the only noise it
knows. With repeats, each node's runs are also tested against the other nodes' runs pooled
(a one-sided Wilcoxon-Mann-Whitney rank test, exact for small samples): a node whose runs lie
below the others' (p < RANK_ALPHA) by more than MIN_SHIFT of their median is slow, however
spread the nodes are, as `accept --fleet` would fail it (its rule asks 95% of the fleet's
median). Under equal nodes the test is exact, so a node is called slow by chance at most
RANK_ALPHA of the time. Each cell says the smallest slowdown its noise lets it find.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from accelbench.analysis import validity
from accelbench.records.result import Result, cell_key

MIN_NODES = 5
"""Nodes a cell needs before any of them is judged against the others."""
Z_BOUND = 3.5
"""Iglewicz and Hoaglin's bound on the modified z-score."""
MAD_FLOOR = 0.01
"""The least MAD, as a share of the median."""
RANK_ALPHA = 0.005
"""The rank test's one-sided level: a node of an equal fleet is called slow by chance at most
this often."""
MIN_SHIFT = 0.05
"""The least slowdown the rank test calls slow, as a share of the others' median: the margin of
the acceptance rule's 95% (analysis/acceptance.toml)."""


@dataclass(frozen=True)
class Node:
    """One node's rate in one cell: the median of its measured repeats."""

    name: str
    rate: float
    runs: int
    z: float
    p_slower: float | None = None
    """The rank test's one-sided p-value that its runs lie below the other nodes' runs (None
    with one run, or too few runs for it to reach RANK_ALPHA)."""
    shift: float = 0.0
    """Its rate over the other nodes' median, less one (-0.34: 34% slower than they are)."""

    @property
    def slow_by_rank(self) -> bool:
        return self.p_slower is not None and self.p_slower < RANK_ALPHA and -self.shift > MIN_SHIFT


@dataclass(frozen=True)
class FleetCell:
    """A cell run on several nodes of one platform, and how each node's rate sits in the
    fleet's."""

    example: Result
    """One of the cell's results, to name it."""
    nodes: list[Node]
    median: float
    mad: float
    """The median absolute deviation, floored at MAD_FLOOR of the median."""
    left_out: int
    """Results not counted: contended, or without a rate."""
    detectable: float | None = None
    """The smallest slowdown (a share of the median) a node would be found at, given the fleet's
    spread: by the rank test where repeats let it decide, else by the modified z-score."""

    @property
    def outliers(self) -> list[Node]:
        found = [n for n in self.nodes if abs(n.z) > Z_BOUND or n.slow_by_rank]
        return found if self.judged else []

    @property
    def judged(self) -> bool:
        return len(self.nodes) >= MIN_NODES


class Point(NamedTuple):
    """What the fleet needs of a result (a stored listing holds it too: no record is read)."""

    platform: str
    cell: str
    """Its cell without the platform (cell_key, or a hash of it)."""
    node: str
    counted: bool
    """Measured, with a rate, and not contended."""
    items_per_s: float
    key: str


def point(r: Result) -> Point:
    return Point(
        r.platform,
        cell_key(r, platform=False),
        r.env.hostname,
        _counted(r),
        r.items_per_s or 0.0,
        r.key,
    )


@dataclass
class _Runs:
    """What a cell keeps of its results as they are read: one to name it, each node's counted
    rates, the nodes that ran it and how many were left out."""

    example: str
    """The key of its first result."""
    by_node: dict[str, list[float]]
    nodes: set[str]
    left_out: int = 0


def cells(results: Iterable[Result]) -> list[FleetCell]:
    """Each cell that nodes of one platform ran (its platform label and device model alike,
    the node its host name), with every node's modified z-score; cells run on one node only are
    left out. One pass that keeps each result's rate, and the first of each cell: a site's
    results can be streamed through it."""
    firsts: dict[str, Result] = {}
    seen: set[tuple[str, str]] = set()

    def points() -> Iterator[Point]:
        for r in results:
            p = point(r)
            if (p.platform, p.cell) not in seen:
                seen.add((p.platform, p.cell))
                firsts[r.key] = r
            yield p

    return judged(points(), lambda keys: [firsts[k] for k in keys])


def judged(
    points: Iterable[Point], read: Callable[[Sequence[str]], Sequence[Result]]
) -> list[FleetCell]:
    """cells() of the results' points; `read` gives the results of keys, one for each cell
    judged, to name it."""
    by_cell: dict[tuple[str, str], _Runs] = {}
    for p in points:
        runs = by_cell.setdefault((p.platform, p.cell), _Runs(p.key, defaultdict(list), set()))
        runs.nodes.add(p.node)
        if p.counted:
            runs.by_node[p.node].append(p.items_per_s)
        else:
            runs.left_out += 1
    spanning = [runs for runs in by_cell.values() if len(runs.nodes) >= 2]
    keys = [runs.example for runs in spanning]
    examples = dict(zip(keys, read(keys), strict=True))
    found = []
    for runs in spanning:
        by_node = runs.by_node
        rates = {node: statistics.median(values) for node, values in by_node.items()}
        median = statistics.median(rates.values()) if rates else 0.0
        spread = statistics.median(abs(v - median) for v in rates.values()) if rates else 0.0
        mad = max(spread, MAD_FLOOR * median)
        nodes = [_node(node, by_node, rates, median, mad) for node in sorted(rates)]
        normal = {n.name for n in nodes if abs(n.z) <= Z_BOUND and not n.slow_by_rank}
        detectable = _detectable({k: by_node[k] for k in normal} or by_node, median, mad)
        found.append(
            FleetCell(examples[runs.example], nodes, median, mad, runs.left_out, detectable)
        )
    return found


def _node(
    name: str, by_node: dict[str, list[float]], rates: dict[str, float], median: float, mad: float
) -> Node:
    """One node's rate and both tests of it against the fleet."""
    mine = by_node[name]
    others = [x for node, values in by_node.items() if node != name for x in values]
    others_median = statistics.median(rates[n] for n in rates if n != name) if others else 0.0
    z = 0.6745 * (rates[name] - median) / mad if mad else 0.0
    p = rank_p_lower(mine, others) if _decidable(len(mine), len(others)) else None
    shift = rates[name] / others_median - 1 if others_median else 0.0
    return Node(name, rates[name], len(mine), z, p, shift)


def _decidable(mine: int, others: int) -> bool:
    """Whether the rank test can reach RANK_ALPHA at all: its least p is 1 / C(n, mine)."""
    return mine >= 2 and others >= 2 and math.comb(mine + others, mine) * RANK_ALPHA > 1


def _detectable(by_node: dict[str, list[float]], median: float, mad: float) -> float | None:
    """The smallest slowdown found for sure: with repeats, a node whose runs all lie below every
    run of the nodes not found (the rank test's least p) by MIN_SHIFT at least, that is the
    span of those runs; else what the modified z-score's bound asks."""
    if not median:
        return None
    typical = statistics.median(len(v) for v in by_node.values())
    runs = [x for values in by_node.values() for x in values]
    if _decidable(int(typical), len(runs) - int(typical)):
        return max(MIN_SHIFT, (max(runs) - min(runs)) / median)
    return Z_BOUND * mad / 0.6745 / median


def rank_p_lower(mine: list[float], others: list[float]) -> float:
    """The one-sided Wilcoxon-Mann-Whitney p-value that `mine` lie below `others`: the chance,
    were they one population, of a U (pairs where mine is above, ties half) this small. Exact
    (the U distribution by recursion) for small samples, else the normal approximation."""
    ordered = sorted(others)  # U by bisection: m log n, not the m n pairs (4M at a site's 100k)
    u = 0.0
    for x in mine:
        below = bisect.bisect_left(ordered, x)
        u += below + 0.5 * (bisect.bisect_right(ordered, x, below) - below)
    m, n = len(mine), len(others)
    if m * n <= 600:
        return _u_cumulative(m, n)[math.floor(u)] / math.comb(m + n, m)
    sd = math.sqrt(m * n * (m + n + 1) / 12)
    return 0.5 * math.erfc(-((u + 0.5 - m * n / 2) / sd) / math.sqrt(2))


@functools.cache
def _u_cumulative(m: int, n: int) -> tuple[int, ...]:
    """The orderings of m and n values whose U is at most each value from 0 to m n: one table
    per pair of sizes, which a fleet's thousands of node tests share (16,384 at a site's 100k
    results took 73 s when each made its own)."""
    return tuple(itertools.accumulate(_u_counts(m, n)))


def _u_counts(m: int, n: int) -> list[int]:
    """How many orderings of m and n values give each U from 0 to m n (no ties)."""
    # counts[j][u] for samples of i and j, built up i by i: f(i, j) = f(i-1, j) at u-j + f(i, j-1)
    rows = [[1] for _ in range(n + 1)]
    for i in range(1, m + 1):
        new = [[1]]
        for j in range(1, n + 1):
            size = i * j + 1
            row = [0] * size
            for u, c in enumerate(rows[j]):  # the largest of all is one of mine: j pairs above
                row[u + j] += c
            for u, c in enumerate(new[j - 1]):  # it is one of theirs
                row[u] += c
            new.append(row)
        rows = new
    return rows[n]


def counts(status: str, items_per_s: float | None, flags: Iterable[str]) -> bool:
    """Whether the fleet counts a result's rate: measured, a rate, and not contended (`flags`:
    its verdict's)."""
    return status == "ok" and bool(items_per_s) and validity.Flag.CONTENDED not in flags


def _counted(result: Result) -> bool:
    if result.status != "ok" or not result.items_per_s:
        return False  # the verdict is not worked out for nothing
    return counts(result.status, result.items_per_s, [f for f, _ in validity.verdict(result)])
