"""`accelbench fleet`: which node of a fleet is the slow one (analysis.fleet)."""

from __future__ import annotations

from typing import Annotated

import typer

from accelbench.analysis import fleet as fleet_analysis
from accelbench.cli.app import DbsOption, PlatformFilter, WorkloadFilter, app, console, load
from accelbench.report import fleet as fleet_text


@app.command()
def fleet(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    fail_on_outliers: Annotated[
        bool,
        typer.Option(
            "--fail-on-outliers", help="Exit 1 when any node is an outlier: for acceptance."
        ),
    ] = False,
    db: DbsOption = None,
) -> None:
    """The nodes whose rate in a cell lies outside the rates of the other nodes of their platform
    (the node: its host name): a modified z-score from the median and the median absolute
    deviation above 3.5. Merge each node's database with repeated --db, or import them into one."""
    found, _ = load(db, workload, platform)
    cells = fleet_analysis.cells(found)
    for line in fleet_text.lines(cells):
        console.print(line)
    if not cells:
        console.print("no cell was run on two nodes or more of one platform: no fleet to judge")
    outliers = sum(len(c.outliers) for c in cells)
    if outliers and fail_on_outliers:
        typer.echo(f"error: {outliers} outlier(s) in the fleet (--fail-on-outliers)", err=True)
        raise typer.Exit(1)
