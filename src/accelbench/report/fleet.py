"""The fleet's lines: for each cell run on several nodes of one platform, the fleet's median
and spread, and each node outside it with its evidence (analysis.fleet)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from accelbench.analysis.fleet import MIN_NODES, RANK_ALPHA, Z_BOUND, FleetCell, Node
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
