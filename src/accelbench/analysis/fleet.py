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
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench.analysis import validity
from accelbench.records.result import Result, cell_key

MIN_NODES = 5
"""Nodes a cell needs before any of them is judged against the others."""
Z_BOUND = 3.5
"""Iglewicz and Hoaglin's bound on the modified z-score."""
MAD_FLOOR = 0.01
"""The least MAD, as a share of the median."""


@dataclass(frozen=True)
class Node:
    """One node's rate in one cell: the median of its measured repeats."""

    name: str
    rate: float
    runs: int
    z: float


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

    @property
    def outliers(self) -> list[Node]:
        return [n for n in self.nodes if abs(n.z) > Z_BOUND] if self.judged else []

    @property
    def judged(self) -> bool:
        return len(self.nodes) >= MIN_NODES


def cells(results: Sequence[Result]) -> list[FleetCell]:
    """Each cell that nodes of one platform ran (its platform label and device model alike,
    the node its host name), with every node's modified z-score; cells run on one node only are
    left out."""
    by_cell: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in results:
        by_cell[r.platform, cell_key(r, platform=False)].append(r)
    found = []
    for runs in by_cell.values():
        counted = [r for r in runs if _counted(r)]
        by_node: dict[str, list[float]] = defaultdict(list)
        for r in counted:
            by_node[r.env.hostname].append(r.items_per_s or 0.0)
        if len({r.env.hostname for r in runs}) < 2:
            continue
        rates = {node: statistics.median(values) for node, values in by_node.items()}
        median = statistics.median(rates.values()) if rates else 0.0
        spread = statistics.median(abs(v - median) for v in rates.values()) if rates else 0.0
        mad = max(spread, MAD_FLOOR * median)
        nodes = [
            Node(node, rate, len(by_node[node]), 0.6745 * (rate - median) / mad if mad else 0.0)
            for node, rate in sorted(rates.items())
        ]
        found.append(FleetCell(runs[0], nodes, median, mad, len(runs) - len(counted)))
    return found


def _counted(result: Result) -> bool:
    if result.status != "ok" or not result.items_per_s:
        return False
    return all(flag is not validity.Flag.CONTENDED for flag, _ in validity.verdict(result))
