"""The command that follows cells over time: history, and its gate for nightly runs."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from accelbench.analysis.history import regression
from accelbench.cli.app import (
    DbsOption,
    PlatformFilter,
    WorkloadFilter,
    app,
    check_filters,
    console,
    reads,
)
from accelbench.errors import AccelbenchError
from accelbench.report import history


def _threshold(text: str | None) -> float | None:
    """--fail-on regression[:PCT] as the percentage (0 for any significant regression)."""
    if text is None:
        return None
    kind, _, pct = text.partition(":")
    try:
        value = float(pct.rstrip("%")) if pct else 0.0
    except ValueError:
        value = -1.0
    if kind != "regression" or not 0 <= value < 100:
        raise AccelbenchError(
            f"--fail-on {text!r}: give regression or regression:PCT, PCT a percentage such as 5"
        )
    return value


@app.command("history")
@reads
def history_command(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    host: Annotated[str | None, typer.Option(help="Only runs on this host.")] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            help="regression or regression:PCT: exit 1 when a cell's newest change point is a "
            "significant slowdown (larger than PCT percent): the gate of a nightly run.",
        ),
    ] = None,
    between: Annotated[
        tuple[str, str] | None,
        typer.Option(
            help="Set the runs of a second period against a first's, cell by cell: each a day "
            "(2026-11-15), days (2026-11-01..2026-11-14) or a captured field's value "
            "(torch=2.14.1).",
        ),
    ] = None,
    runs: Annotated[
        bool,
        typer.Option(
            "--runs",
            help="List each run too: its rate and interval, its verdict, and the software it "
            "ran (the first) or what moved since the run before.",
        ),
    ] = False,
    fmt: Annotated[
        str, typer.Option("--format", help="table or json (one document, docs/formats.md).")
    ] = "table",
    db: DbsOption = None,
) -> None:
    """Each cell's runs on each host over time, the change points in them with their size and
    interval, and the software that changed there (docs/history.md). Run the same cells again
    with `run --force` (each run a new point) to make a history."""
    check_filters(workload, platform, None)
    pct = _threshold(fail_on)
    if fmt not in ("table", "json"):
        raise AccelbenchError(f"--format {fmt!r}: give table or json")
    if between and fmt == "json":
        raise AccelbenchError("--between answers as a table: leave out --format json")
    for text in between or ():
        history.period(text)  # a bad period is refused before the database is read
    found = history.series(db, workload=workload, platform=platform, host=host)
    if fmt == "json":
        sys.stdout.write(history.document(found).model_dump_json() + "\n")  # compact: a site's
    elif not found:
        console.print("no stored results match")
    elif fmt == "table":  # plain lines: a site's 30,000 took rich 2 s
        shown = history.between_lines(found, *between) if between else history.lines(found, runs)
        sys.stdout.write("".join(f"{line}\n" for line in shown))
    if pct is None:
        return
    slower = [(s, c) for s in found if (c := regression(s.changes, pct)) is not None]
    for s, change in slower:
        print(f"regression: {s.name}: {change.text()}: {change.cause}", file=sys.stderr)
    if slower:
        raise typer.Exit(1)
