"""Tables as plain data (a title, headers and rows of text) drawn for the terminal, as Markdown
or as HTML from the same rows; and the PEARC '22 paper's Tables 1 and 3 built from
stored results that have their axes."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rich.table import Table

from accelbench.records.result import Result, measured
from accelbench.report import inert
from accelbench.report.cells import LAST_EPOCH, last_epoch_text, rate_text


@dataclass(frozen=True)
class Grid:
    title: str
    headers: tuple[str, ...]
    rows: Sequence[Sequence[str]]
    text_columns: frozenset[int] = field(default_factory=frozenset)
    """Columns of words, aligned left; the others hold numbers and align right."""


def rich(grid: Grid) -> Table:
    """The grid for the terminal; every cell inert (no markup, no control sequence). A narrow
    terminal folds long names (a path to a user's model) onto more lines, never cuts them."""
    out = Table(title=inert.terminal(grid.title) if grid.title else None)
    for i, name in enumerate(grid.headers):
        text = i in grid.text_columns
        out.add_column(inert.terminal(name), justify="left" if text else "right", overflow="fold")
    for row in grid.rows:
        out.add_row(*map(inert.terminal, row))
    return out


def text(grid: Grid) -> str:
    """The grid as fixed-width lines, every cell inert on one line: for a table too long for
    rich(), which takes about a millisecond a row to lay out (11 s for 10,000 results)."""
    return "".join(text_lines(grid))


def text_lines(grid: Grid) -> Iterator[str]:
    """text(), a line at a time (each ends in a newline). Each cell is made inert once (a
    printable one is itself), for its column's width and its line both."""
    headers = [inert.line(h) for h in grid.headers]
    rows = [[inert.line(c) for c in row] for row in grid.rows]
    widths = list(map(len, headers))
    for row in rows:
        widths = list(map(max, widths, map(len, row)))
    justify = [str.ljust if i in grid.text_columns else str.rjust for i in range(len(widths))]

    def line(cells: Sequence[str]) -> str:
        placed = [put(c, w) for put, c, w in zip(justify, cells, widths, strict=True)]
        return "  ".join(placed).rstrip() + "\n"

    if grid.title:
        yield inert.line(grid.title) + "\n"
    yield line(headers)
    yield "  ".join("-" * w for w in widths) + "\n"
    yield from map(line, rows)


def markdown(grid: Grid) -> str:
    return "".join(markdown_lines(grid))


def markdown_lines(grid: Grid) -> Iterator[str]:
    """markdown() a line at a time, each with its newline."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(map(inert.markdown, cells)) + " |\n"

    if grid.title:
        yield f"**{inert.markdown(grid.title)}**\n\n"
    rule = ["---" if i in grid.text_columns else "---:" for i in range(len(grid.headers))]
    yield line(grid.headers)
    yield "|" + "|".join(rule) + "|\n"
    yield from map(line, grid.rows)


def to_html(grid: Grid) -> str:
    """An HTML table; every string from the data is escaped."""
    return "".join(html_lines(grid))


def html_lines(grid: Grid) -> Iterator[str]:
    """to_html() a row at a time."""

    def cells(tag: str, row: Sequence[str]) -> str:
        return "".join(
            f'<{tag} class="{"text" if i in grid.text_columns else "num"}">{html.escape(c)}</{tag}>'
            for i, c in enumerate(row)
        )

    caption = f"<caption>{html.escape(grid.title)}</caption>" if grid.title else ""
    yield f"<table>{caption}<thead><tr>{cells('th', grid.headers)}</tr></thead><tbody>"
    yield from (f"<tr>{cells('td', row)}</tr>" for row in grid.rows)
    yield "</tbody></table>"


def seed_table_1(results: Sequence[Result]) -> Grid | None:
    """PEARC '22 Table 1: throughput in the first and the steady epoch as the device count
    grows (the first epoch holds compilation). None unless some cell was run at two or more
    device counts."""
    groups: dict[tuple[object, ...], list[Result]] = defaultdict(list)
    for r in measured(results, "table-1"):
        s = r.spec
        groups[(s.workload, r.platform, s.batch_size, s.precision, s.compile)].append(r)
    rows = []
    for members in groups.values():
        if len({r.num_devices for r in members}) < 2:
            continue
        for r in sorted(members, key=lambda r: (r.num_devices, r.spec.nodes, r.spec.repeat)):
            m = r.metrics
            assert m is not None
            rows.append(
                (
                    r.spec.workload,
                    r.platform,
                    r.spec.precision,
                    str(r.num_devices),
                    str(r.spec.nodes),
                    str(r.spec.replicas),
                    str(r.spec.batch_size),
                    rate_text(m.epochs[0].items_per_s),
                    rate_text(m.items_per_s),
                )
            )
    if not rows:
        return None
    return Grid(
        "Training throughput by device count, first and steady epoch (PEARC '22, Table 1)",
        (
            "Workload",
            "Platform",
            "Precision",
            "Devices",
            "Nodes",
            "Replicas",
            "Micro batch",
            "1st epoch (items/s)",
            "Steady (items/s)",
        ),
        rows,
        frozenset({0, 1, 2}),
    )


def seed_table_3(results: Sequence[Result]) -> Grid | None:
    """PEARC '22 Table 3: batch size on one device, then devices at one batch size, with
    synchronised batch norm's span and the epoch time. None unless some workload and platform
    were run at two or more batch sizes and two or more device counts."""
    groups: dict[tuple[object, ...], list[Result]] = defaultdict(list)
    for r in measured(results, "table-3"):
        groups[(r.spec.workload, r.platform, r.spec.precision)].append(r)
    rows = []
    for members in groups.values():
        if (
            len({r.spec.batch_size for r in members}) < 2
            or len({r.num_devices for r in members}) < 2
        ):
            continue
        for r in sorted(members, key=lambda r: (r.num_devices, r.spec.batch_size, r.spec.repeat)):
            m = r.metrics
            assert m is not None
            rows.append(
                (
                    r.spec.workload,
                    r.platform,
                    r.spec.precision,
                    str(r.spec.bn_span),
                    str(r.spec.batch_size),
                    str(r.spec.grad_accum),
                    str(r.spec.replicas),
                    str(r.num_devices),
                    rate_text(m.items_per_s),
                    last_epoch_text(r),
                )
            )
    if not rows:
        return None
    return Grid(
        "Training scaling by batch size and devices (PEARC '22, Table 3)",
        (
            "Workload",
            "Platform",
            "Precision",
            "BN span",
            "Micro batch",
            "Accum",
            "Replicas",
            "Devices",
            "Throughput (items/s)",
            LAST_EPOCH,
        ),
        rows,
        frozenset({0, 1, 2}),
    )
