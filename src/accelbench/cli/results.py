"""Commands that read results: list, env, results, references, compare, report, export,
import, recommend."""

from __future__ import annotations

import gc
import itertools
import sys
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TextIO, get_args

import typer

from accelbench import workloads
from accelbench.analysis import comparison, references
from accelbench.cell.environment import capture
from accelbench.cli.app import (
    AnswerFormat,
    AnswerOption,
    DbOption,
    DbsOption,
    Format,
    LatencyBoundOption,
    PlatformFilter,
    StatusFilter,
    WorkloadFilter,
    app,
    check_filters,
    check_out,
    console,
    load,
    print_answer,
    reads,
    show_grid,
    show_rows,
    write_stream,
)
from accelbench.cli.options import spec_help
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result
from accelbench.records.spec import DeviceType
from accelbench.report import answers, tabular
from accelbench.report import compare as compare_text
from accelbench.report.database import ResultStore, compared, flats_all, source_all
from accelbench.report.results import Rows, projection_lines, token_projection_lines
from accelbench.storage import exchange
from accelbench.storage.several import stream_all, texts_all

TokensOption = Annotated[
    float | None,
    typer.Option(
        help="Project the days and device-hours to train this many tokens (e.g. 1e12) from each "
        "language model's training throughput, marked as projected (recommend: with "
        "--objective time-to-train).",
        min=1,
    ),
]


@app.command("list")
def list_workloads(fmt: AnswerOption = AnswerFormat.table) -> None:
    """The workloads, one line each."""
    forms = [
        "timm/<model>",
        "hf/<model_type>",
        "path/to/file.py:function",
        "served/<model> (--scenario serve)",
        "micro/<kind> (--scenario micro)",
    ]
    if fmt is AnswerFormat.json:
        named = [
            answers.Workload(name=name, description=workloads.describe(name))
            for name in workloads.WORKLOADS
        ]
        print_answer(answers.ListAnswer(workloads=named, forms=forms, micro=list(workloads.MICRO)))
        return
    width = max(map(len, workloads.WORKLOADS))
    for name in workloads.WORKLOADS:
        console.print(f"{name:<{width}}  {workloads.describe(name)}", soft_wrap=True)
    console.print(
        f"\nAlso: {', '.join(forms)}, where micro/<kind> is one of {', '.join(workloads.MICRO)} "
        "(see docs/usage.md)",
        soft_wrap=True,
    )


@app.command("suites")
def list_suites(fmt: AnswerOption = AnswerFormat.table) -> None:
    """The suites `run --suite` runs: cells at published figures' configurations."""
    from accelbench import suites

    found = [
        answers.Suite(
            name=name,
            description=suite.description,
            parts=[
                answers.SuitePart(devices=list(p.devices), figure=p.figure, cells=len(p.specs()))
                for p in suite.parts
            ],
        )
        for name in suites.names()
        for suite in [suites.load(name)]
    ]
    if fmt is AnswerFormat.json:
        print_answer(answers.SuitesAnswer(suites=found))
        return
    for suite in found:
        console.print(f"{suite.name}: {suite.description}", soft_wrap=True)
        for part in suite.parts:
            where = ", ".join(part.devices) if part.devices else "any device"
            console.print(f"  {part.cells} cell(s) on {where}: {part.figure}", soft_wrap=True)


@app.command()
def env(
    device: Annotated[str, typer.Option(help=spec_help("device"))] = "auto",
    fmt: AnswerOption = AnswerFormat.table,
) -> None:
    """The detected platform: devices, host CPU, NUMA nodes, versions."""
    if device not in get_args(DeviceType):
        raise AccelbenchError(
            f"unknown device {device!r}; use one of: {', '.join(get_args(DeviceType))}"
        )
    captured = capture(device)
    if fmt is AnswerFormat.json:
        print_answer(answers.EnvAnswer(environment=captured))
        return
    for field, value in captured.model_dump().items():
        console.print(f"{field:<18} {value}")


@app.command()
@reads
def results(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    status: StatusFilter = None,
    limit: Annotated[int | None, typer.Option(help="Only the newest N.", min=1)] = None,
    fmt: Annotated[
        Format, typer.Option("--format", help="table, json (full records) or csv.")
    ] = Format.table,
    latency_bound_ms: LatencyBoundOption = None,
    project_epochs: Annotated[
        float | None,
        typer.Option(
            help="Also project each training run's time to train this many epochs from its "
            "throughput (with --epoch-items), marked as projected.",
            min=0,
        ),
    ] = None,
    epoch_items: Annotated[
        int | None, typer.Option(help="Items in one epoch of the data set, for --project-epochs.")
    ] = None,
    tokens: TokensOption = None,
    db: DbOption = None,
) -> None:
    """The stored runs, oldest first."""
    check_filters(workload, platform, status)
    if (project_epochs is None) != (epoch_items is None) or (epoch_items or 1) < 1:
        raise AccelbenchError(
            "give --project-epochs with --epoch-items (a positive count), e.g. "
            "--project-epochs 90 --epoch-items 1281167 for ImageNet-1k"
        )
    filters: dict[str, Any] = {"workload": workload, "platform": platform, "status": status}
    with ResultStore(db, writable=False) as store:
        if fmt is Format.json and not limit:  # the records as stored: none read
            exchange.write_texts((t for _, _, t in store.stream_texts(**filters)), sys.stdout)
        elif fmt is Format.json:  # a record at a time
            found = store.query(**filters, limit=limit) if limit else store.stream(**filters)
            exchange.write_json(found, sys.stdout)
        elif fmt is Format.csv:  # the stored flat rows: none read (a row waits in a file)
            flats = store.flats(**filters, limit=limit)
            tabular.write_flats((f for *_, f in flats), sys.stdout)
        elif rows := store.listings(**filters, limit=limit):  # no record read but a few
            gc.freeze()  # the collector need not walk them while the table is made (1 s)
            try:
                show_rows(Rows(rows), store.records, latency_bound_ms)
            finally:
                gc.unfreeze()
            projected = project_epochs is not None or tokens is not None
            found = store.records([r.key for r in rows]) if projected else []
            if project_epochs is not None and epoch_items is not None:
                for line in projection_lines(found, project_epochs, epoch_items):
                    console.print(line)
            for line in token_projection_lines(found, tokens) if tokens else []:
                console.print(line)
        else:
            console.print("no stored results match")


@app.command("references")
def list_references(
    workload: Annotated[str | None, typer.Option(help="Only this workload.")] = None,
    platform: Annotated[
        str | None, typer.Option(help="Only platforms whose name contains this.")
    ] = None,
    table: Annotated[
        str | None, typer.Option(help="Only tables whose name contains this, e.g. 'Table 4'.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
) -> None:
    """Published results shipped with accelbench, with their sources; platforms set side by
    side at equal device counts under the table."""
    if workload is not None:
        workloads.check_name(workload)
    found = references.query(workload=workload, platform=platform, table=table)
    if fmt is Format.table:
        console.print(compare_text.references_table(found))
        for line in compare_text.head_to_head(found):
            console.print(line)
    elif fmt is Format.json:
        print_answer(compare_text.ReferencesAnswer(references=found))
    else:
        print(tabular.rows_csv([r.model_dump() for r in found]), end="")


@app.command()
@reads
def compare(
    by: Annotated[
        str | None,
        typer.Option(
            help="Set each value of this against the baseline's at matched conditions: platform, "
            "precision, batch_size, compile, replicas or any other setting."
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="The value of --by the others are set against (default: the natural one in "
            "each cell: fp32, no compile, the fewest devices, the smallest batch)."
        ),
    ] = None,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference", help="Set each stored run beside its closest published figure."
        ),
    ] = False,
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    tolerance: Annotated[
        float, typer.Option(help="Band around the published figure, percent.", min=0)
    ] = references.DEFAULT_TOLERANCE_PCT,
    fmt: AnswerOption = AnswerFormat.table,
    db: DbsOption = None,
) -> None:
    """Throughput ratios between configurations (--by), with intervals; or stored runs against
    published results (--reference), exiting 1 when any lies outside --tolerance."""
    if (by is None) == (not reference):
        raise AccelbenchError(
            "give --by FIELD (e.g. --by platform) to compare configurations, or --reference to "
            "compare with published results"
        )
    check_filters(workload, platform, "ok")
    if by is not None:  # from the listings: a site's records are not read
        cells = compared(db, by, workload=workload, platform=platform)
        found_ratios = comparison.ratios(cells, by, baseline)
        summary = comparison.summary(found_ratios)
        alone = comparison.unmatched(cells, by, baseline)
        if fmt is AnswerFormat.json:  # standard output holds the JSON alone
            print_answer(compare_text.ratios_json(by, baseline, found_ratios, summary, alone))
            return
        if found_ratios:
            show_grid(compare_text.ratio_grid(found_ratios, by))  # plain text when long
        for line in [
            *compare_text.ratio_summary_lines(summary),
            *compare_text.unmatched_lines(alone, by),
        ]:
            console.print(line)
        if not found_ratios:
            console.print(f"no configuration was run at two values of {by}: nothing to compare")
        return
    found, _ = load(db, workload, platform, status="ok")
    matches = [m for m in map(references.match, found) if m is not None]
    unmatched = sorted(
        {(r.spec.workload, r.platform) for r in found}
        - {(m.result.spec.workload, m.result.platform) for m in matches}
    )
    outside = [m for m in matches if m.verdict(tolerance)[0] is not references.Agreement.AGREES]
    if fmt is AnswerFormat.json:
        print_answer(compare_text.reference_answer(matches, unmatched, tolerance))
    else:
        _reference_text(found, matches, unmatched, tolerance)
    if outside:  # an acceptance test: the node does not deliver what it should
        typer.echo(
            f"error: {len(outside)} of {len(matches)} run(s) outside ±{tolerance:g}% of their "
            "published figure: the reasons are above",
            err=True,
        )
        raise typer.Exit(1)


def _reference_text(
    found: list[Result],
    matches: list[references.Match],
    unmatched: list[tuple[str, str]],
    tolerance: float,
) -> None:
    if matches:
        console.print(compare_text.reference_table(matches, tolerance))
        for line in compare_text.reference_notes(matches, tolerance):
            console.print(line)
    for name, where in unmatched:
        console.print(f"{name} on {where}: no published throughput for this device family")
    if not found:
        console.print("no stored results match")


class ReportFormat(StrEnum):
    html = "html"
    md = "md"
    csv = "csv"
    json = "json"


NO_MATCH = "no stored results match: run a sweep first, or loosen the filters"


@app.command("report")
@reads
def make_report(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    status: StatusFilter = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write it here (default for html: report.html; else standard output)."),
    ] = None,
    fmt: Annotated[
        ReportFormat,
        typer.Option(
            "--format", help="html (one self-contained page with figures), md, csv, json."
        ),
    ] = ReportFormat.html,
    figures_dir: Annotated[
        Path | None, typer.Option("--figures", help="Also write every figure here as PNG and SVG.")
    ] = None,
    tokens: TokensOption = None,
    db: DbsOption = None,
) -> None:
    """The stored runs as a report: figures (throughput against batch size, scaling, first
    against steady epoch, latency, time to train, energy and MFU) and the seed paper's tables."""
    from accelbench.report import document, figures, plotted
    from accelbench.report import history as history_text

    if fmt is ReportFormat.html:
        out = out or Path("report.html")
    if out is not None:
        check_out(out)
    if figures_dir is not None:
        check_out(figures_dir, "a folder", "--figures")
    check_filters(workload, platform, status)
    filters: dict[str, Any] = {"workload": workload, "platform": platform, "status": status}
    if fmt in (ReportFormat.csv, ReportFormat.json):  # the records, a result at a time
        csv = fmt is ReportFormat.csv  # either as stored: no record read
        each: Iterator[Any] = flats_all(db, **filters) if csv else texts_all(db, **filters)
        first = next(each, None)
        if first is None:
            raise AccelbenchError(NO_MATCH)
        write: Callable[[Iterable[Any], TextIO], int] = (
            tabular.write_flats if csv else exchange.write_texts
        )
        count = (
            write(itertools.chain([first], each), sys.stdout)
            if out is None
            else write_stream(out, lambda f: write(itertools.chain([first], each), f))
        )
        if out is not None:
            console.print(f"wrote {out}: {count} results")
        if figures_dir is None:
            return
    # Otherwise the listings, the records the tables read and the records the figures draw.
    with source_all(db, **filters) as (source, sources):
        if not source.rows.rows:
            raise AccelbenchError(NO_MATCH)
        keys = [r.key for r in source.rows.rows]
        plots = []
        if fmt is ReportFormat.html or figures_dir:
            plots = figures.plots([], plotted.read(source), source.rows.verdicts)
            plots += history_text.plots(source)
        projected = (  # each result's own projection: the records read one at a time
            token_projection_lines(stream_all(db, **filters), tokens) if tokens else []
        )
        if fmt in (ReportFormat.html, ReportFormat.md):
            lines = (
                document.page_lines(source, plots, sources, projected)
                if fmt is ReportFormat.html
                else document.markdown_lines(source, projected)
            )
            if out is None:
                sys.stdout.writelines(lines)
            else:
                write_stream(out, lambda f: f.writelines(lines))
                console.print(f"wrote {out}: {len(keys)} results, {len(plots)} figures")
    if figures_dir is not None:
        figures_dir.mkdir(exist_ok=True)
        for plot in plots:
            for suffix in ("svg", "png"):
                (figures_dir / f"{plot.name}.{suffix}").write_bytes(plot.render(suffix))
        console.print(f"wrote {2 * len(plots)} figure files (PNG and SVG) to {figures_dir}")
