"""The fleet's lines: for each cell run on several nodes of one platform, the fleet's median
and spread, and each node outside it with its evidence (analysis.fleet)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from accelbench.analysis.fleet import MIN_NODES, RANK_ALPHA, Z_BOUND, FleetCell, Node
from accelbench.records.frozen import Frozen
from accelbench.records.spec import RunSpec
from accelbench.report.cells import describe, rate_text


def lines(found: Sequence[FleetCell], name: Callable[[RunSpec], str] = describe) -> list[str]:
    """A line per cell, then a line per outlier under it."""
    out = []
    for cell in found:
        example = cell.example
        unit = example.headline.unit if example.headline else "items/s"
        left_out = f", {cell.left_out} result(s) left out (contended or unmeasured)"
        head = (
            f"{name(example.spec)} on {example.platform}: {len(cell.nodes)} node(s), median "
            f"{rate_text(cell.median)} {unit}, MAD {rate_text(cell.mad)} "
            f"({100 * cell.mad / cell.median if cell.median else 0:.1f}%)"
            + (left_out if cell.left_out else "")
        )
        if not cell.judged:
            out.append(f"{head}: too few nodes to judge (at least {MIN_NODES})")
            continue
        outliers = cell.outliers
        power = (
            f"; with this spread, a node {100 * cell.detectable:.0f}% slow would be found"
            if cell.detectable is not None
            else ""
        )
        said = f"{len(outliers)} outlier(s)" if outliers else "no outlier"
        out.append(f"{head}: {said}{power}")
        out += [
            f"  {node.name}: {rate_text(node.rate)} {unit}, {node.rate / cell.median:.2f}x the "
            f"median, modified z {node.z:+.1f} (bound {Z_BOUND}), {node.runs} run(s)"
            + (_ranked(node) if node.slow_by_rank else "")
            for node in outliers
        ]
    return out


def _ranked(node: Node) -> str:
    return (
        f"; its runs lie below the other nodes' (rank test p={node.p_slower:.2g}, bound "
        f"{RANK_ALPHA:g}), {-100 * node.shift:.0f}% under their median"
    )


class FleetNode(Frozen):
    name: str
    """The node's host name."""
    rate: float
    """The median of its measured repeats, items/s."""
    runs: int
    z: float
    """Its modified z-score in the fleet (median and MAD)."""
    p_slower: float | None
    """The rank test's one-sided p-value that its runs lie below the others' (None: too few)."""
    outlier: bool


class FleetCellRates(Frozen):
    cell: str
    platform: str
    median: float
    nodes: list[FleetNode]
    judged: bool
    """Enough nodes to judge (three or more)."""
    left_out: int
    """Results not counted: contended, or without a rate."""
    detectable: float | None
    """The smallest slowdown (a share of the median) a node would be found at."""


class FleetAnswer(Frozen):
    """`accelbench fleet --format json`: each cell run on two nodes or more of a platform."""

    format: Literal["accelbench-fleet"] = "accelbench-fleet"
    version: Literal[1] = 1
    cells: list[FleetCellRates]


def fleet_answer(cells: Sequence[FleetCell]) -> FleetAnswer:
    from accelbench.report.cells import describe

    found = []
    for c in cells:
        outliers = {n.name for n in c.outliers}
        nodes = [
            FleetNode(
                name=n.name,
                rate=n.rate,
                runs=n.runs,
                z=n.z,
                p_slower=n.p_slower,
                outlier=n.name in outliers,
            )
            for n in c.nodes
        ]
        found.append(
            FleetCellRates(
                cell=describe(c.example.spec),
                platform=c.example.platform,
                median=c.median,
                nodes=nodes,
                judged=c.judged,
                left_out=c.left_out,
                detectable=c.detectable,
            )
        )
    return FleetAnswer(cells=found)
