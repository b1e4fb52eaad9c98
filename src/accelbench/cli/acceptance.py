"""Node acceptance: `accelbench fleet` (which node of a fleet is the slow one), `accelbench
accept` (does each result reach its baseline) and `accelbench roofline` (which ceiling binds)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from accelbench.analysis import acceptance
from accelbench.analysis import roofline as roofline_analysis
from accelbench.cli.app import (
    AnswerFormat,
    AnswerOption,
    DbsOption,
    PlatformFilter,
    WorkloadFilter,
    app,
    check_filters,
    console,
    load,
    print_answer,
    reads,
    show_grid,
)
from accelbench.errors import AccelbenchError
from accelbench.report import acceptance as acceptance_text
from accelbench.report import fleet as fleet_text
from accelbench.report import sections
from accelbench.report.database import chosen_all, fleet_all


@app.command()
@reads
def fleet(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    fail_on_outliers: Annotated[
        bool,
        typer.Option(
            "--fail-on-outliers", help="Exit 1 when any node is an outlier: for acceptance."
        ),
    ] = False,
    fmt: AnswerOption = AnswerFormat.table,
    db: DbsOption = None,
) -> None:
    """The nodes whose rate in a cell lies outside the rates of the other nodes of their platform
    (the node: its host name): a modified z-score from the median and the median absolute
    deviation above 3.5. Merge each node's database with repeated --db, or import them into one."""
    check_filters(workload, platform, None)  # only cells run on two hosts or more are read
    cells = fleet_all(db, workload=workload, platform=platform)
    if fmt is AnswerFormat.json:
        print_answer(fleet_text.fleet_answer(cells))
    else:
        for line in fleet_text.lines(cells):
            console.print(line)
        if not cells:
            console.print("no cell was run on two nodes or more of one platform: no fleet to judge")
    outliers = sum(len(c.outliers) for c in cells)
    if outliers and fail_on_outliers:
        typer.echo(f"error: {outliers} outlier(s) in the fleet (--fail-on-outliers)", err=True)
        raise typer.Exit(1)


@app.command()
@reads
def accept(
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="CSV of the figures each result must reach: workload,value and optionally "
            "scenario, platform, batch_size, precision, replicas, unit, source."
        ),
    ] = None,
    use_fleet: Annotated[
        bool,
        typer.Option(
            "--fleet", help="Set each result against its cell's median across the fleet's nodes."
        ),
    ] = False,
    rule: Annotated[
        Path | None,
        typer.Option(
            help="TOML of min_ratio and judge (value or interval), over the shipped rule."
        ),
    ] = None,
    min_ratio: Annotated[
        float | None,
        typer.Option(help="The share of the baseline to reach (shipped: 0.95).", min=0.01, max=10),
    ] = None,
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    fmt: AnswerOption = AnswerFormat.table,
    db: DbsOption = None,
) -> None:
    """Pass or fail for each stored result against a baseline (a centre's file, or the fleet's
    median); exits 1 when any fails."""
    if (baseline is None) == (not use_fleet):
        raise AccelbenchError(
            "give --baseline FILE (a centre's figures) or --fleet (the fleet's medians)"
        )
    chosen = acceptance.load_rule(rule) if rule else acceptance.shipped_rule()
    if min_ratio is not None:
        chosen = chosen.model_copy(update={"min_ratio": min_ratio})
    baselines = acceptance.load_baselines(baseline) if baseline else []
    found, _ = load(db, workload, platform)
    if not found and fmt is AnswerFormat.table:
        console.print("no stored results match")
        return
    judged = acceptance.judge(found, chosen, baselines, use_fleet)
    if fmt is AnswerFormat.json:
        print_answer(acceptance_text.accept_answer(judged, chosen))
    else:
        show_grid(acceptance_text.grid(judged, chosen))
        console.print(acceptance_text.summary(judged))
    failed = [j for j in judged if j.outcome is acceptance.Outcome.FAIL]
    if failed:
        typer.echo(
            f"error: {len(failed)} of {len(judged)} result(s) below their baseline", err=True
        )
        raise typer.Exit(1)


@app.command()
@reads
def roofline(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    fmt: AnswerOption = AnswerFormat.table,
    db: DbsOption = None,
) -> None:
    """Which ceiling binds each model result, from what was measured on its platform and host
    (analysis.roofline): compute (micro/matmul), a training step's memory floor (micro/triad),
    a DDP step's all-reduce (micro/all_reduce) and input (--scenario loader). Only results from a
    platform and host where a ceiling was measured are read."""
    check_filters(workload, platform, None)
    found, matched = chosen_all(db, sections.for_roofline, workload=workload, platform=platform)
    roofs = roofline_analysis.roofs(found)
    if fmt is AnswerFormat.json:
        print_answer(acceptance_text.roofline_answer(roofs))
        return
    if not roofs:
        console.print(
            "no measured model result beside a ceiling: run micro/matmul and the loader on the "
            "platform and host of a model result"
        )
        return
    show_grid(acceptance_text.roofline_grid(roofs))
    for line in acceptance_text.roofline_lines(roofs):
        console.print(line)
    if matched > len(found):
        console.print(
            f"{matched - len(found)} other result(s) ran where no ceiling was measured: left out"
        )
