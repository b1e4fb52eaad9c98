"""The whole report as one document: a self-contained HTML page (figures inlined as SVG, no
script, nothing fetched) or Markdown, from the same tables and notes the terminal shows.

Every string that comes from results (workload, platform and host names, reasons) is escaped:
the page is data, never markup. Its Content-Security-Policy forbids scripts as a second line."""

from __future__ import annotations

import base64
import html
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from importlib.metadata import version

from accelbench import scenarios
from accelbench.analysis import roofline
from accelbench.records.result import Result
from accelbench.report import acceptance as acceptance_text
from accelbench.report import figures, inert, tables
from accelbench.report import fleet as fleet_text
from accelbench.report import results as results_text
from accelbench.report.results import Rows
from accelbench.report.sections import Source

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
figure { margin: 1.5em 0; } figure img { width: 100%; max-width: 860px; height: auto; }
figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }
caption { text-align: left; font-weight: 600; padding: 0.3em 0; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 0.25em 0.6em; }
th { background: #f6f6f6; } td.num, th.num { text-align: right; } td.text, th.text { text-align: left; }
li { margin: 0.2em 0; } .meta { color: #555; }
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def grids(source: Source, rows: Rows | None = None) -> list[tables.Grid]:
    """The report's tables: the results in the seed's Table 4 layout (`rows`, or the source's
    one row per cell), then Tables 1 and 3, the scenarios' own (time to train's), the ceilings
    that bind (roofline) where the results have what they need, and the platforms."""
    results = source.detail
    roofs = [r for r in roofline.roofs(results) if r.ceilings]
    optional = [
        tables.seed_table_1(results),
        tables.seed_table_3(results),
        *scenarios.tables(results),
        acceptance_text.roofline_grid(roofs) if roofs else None,
    ]
    title = "Results (in the layout of PEARC '22, Table 4)"
    main = results_text.grid(rows or source.rows.folded(), title)
    return [main, *(g for g in optional if g is not None), platforms_grid(source.platforms)]


def _parts(
    source: Source, extra: Sequence[str]
) -> tuple[list[tables.Grid], list[tuple[str, list[str]]]]:
    """The tables, and the lists under them with their titles (those that have lines): the
    verdicts' reasons and notes of each cell (its runs folded into one row), `extra` lines
    (projections), the fleet."""
    rows = source.rows.folded()
    notes = [*results_text.row_notes(rows, source.records), *extra]
    lists = [(NOTES, notes), (FLEET, fleet_text.lines(source.fleet))]
    return grids(source, rows), [(title, lines) for title, lines in lists if lines]


def platforms_grid(platforms: Sequence[tuple[Result, int]]) -> tables.Grid:
    """Each platform and host the results came from (the first result of each, and how many),
    with what shapes their numbers."""
    rows = [
        (
            r.platform,
            r.env.hostname,
            r.env.device_type,
            str(len(r.env.devices)),
            r.env.cpu_model,
            r.env.versions.get("torch", ""),
            r.env.cuda_version or "",
            r.env.driver_version or "",
            str(count),
        )
        for r, count in platforms
    ]
    headers = (
        "Platform",
        "Host",
        "Device type",
        "Devices",
        "CPU",
        "torch",
        "CUDA",
        "Driver",
        "Results",
    )
    return tables.Grid("Platforms", headers, rows, frozenset(range(8)) - {3})


def markdown(source: Source | Sequence[Result], extra: Sequence[str] = ()) -> str:
    """The tables and notes in Markdown; `extra` lines (projections) join the notes."""
    return "".join(markdown_lines(_source(source), extra))


def markdown_lines(source: Source, extra: Sequence[str] = ()) -> Iterator[str]:
    """markdown() a line at a time (a site's table need not be held twice as text)."""
    shown, lists = _parts(source, extra)
    for i, grid in enumerate(shown):
        yield "\n" if i else ""
        yield from tables.markdown_lines(grid)
    for title, lines in lists:
        yield f"\n**{title}**\n\n"
        yield from (f"- {inert.markdown(line.strip())}\n" for line in lines)


def _source(source: Source | Sequence[Result]) -> Source:
    return source if isinstance(source, Source) else Source.held(source)


NOTES = "Verdicts and notes"
FLEET = "Fleet: each node against the other nodes of its platform"


def page(
    source: Source | Sequence[Result],
    plots: Sequence[figures.Plot],
    sources: Sequence[str],
    extra: Sequence[str] = (),
) -> str:
    """The HTML report: summary, figures, tables, platforms and the verdicts' reasons; `extra`
    lines (projections) join the notes."""
    return "".join(page_lines(_source(source), plots, sources, extra))


def page_lines(
    source: Source, plots: Sequence[figures.Plot], sources: Sequence[str], extra: Sequence[str]
) -> Iterator[str]:
    """page() a part at a time (a site's table need not be held twice as text)."""
    e = html.escape
    statuses = Counter(r.status for r in source.rows.rows)
    summary = ", ".join(f"{n} {status}" for status, n in statuses.most_common())
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    yield (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>accelbench report</title><style>{CSS}</style></head>\n<body>\n"
        "<h1>accelbench report</h1>\n"
        f'<p class="meta">{len(source.rows.rows)} results ({e(summary)}) from {e(", ".join(sources))}; '
        f"made {made} by accelbench {e(version('accelbench'))}.</p>"
    )
    if plots:
        yield "\n<h2>Figures</h2>"
    for plot in plots:
        svg = base64.b64encode(plot.render("svg")).decode()
        yield (
            f'\n<figure id="{e(plot.name)}"><img alt="{e(plot.title)}" '
            f'src="data:image/svg+xml;base64,{svg}"><figcaption>{e(plot.title)}. '
            f"{e(plot.caption)}</figcaption></figure>"
        )
    yield "\n<h2>Tables</h2>"
    shown, lists = _parts(source, extra)
    for grid in shown:
        yield "\n"
        yield from tables.html_lines(grid)
    for title, lines in lists:
        yield f"\n<h2>{e(title)}</h2><ul>"
        yield from (f"\n<li>{e(line.strip())}</li>" for line in lines)
        yield "\n</ul>"
    yield "\n</body></html>\n"
