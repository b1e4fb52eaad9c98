"""`accelbench history`: each cell's runs on each host over time, read from their listings (which
keep each run's software), so that no record is read whole; its change points
(analysis.history), its lines and its JSON answer."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date, datetime
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

from accelbench.analysis import history
from accelbench.errors import AccelbenchError
from accelbench.records.frozen import Frozen
from accelbench.report.cells import rate_text
from accelbench.report.database import ResultStore, projected
from accelbench.report.drawing import Plot
from accelbench.report.sections import Source
from accelbench.storage.several import open_all

_READ = (
    "words",
    "platform",
    "hostname",
    "fleet_cell",
    "items_per_s",
    "flags",
    "unit",
    "interval",
    "software",
)
"""What a run of a series is read as: fleet_cell is its cell without the platform, whose key
holds the torch version, so that a series runs through an upgrade."""


@dataclass(frozen=True)
class Series:
    name: str
    """The cell in words, its platform and host."""
    host: str
    unit: str
    points: list[history.Point]
    changes: list[history.Change]


def series(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    host: str | None = None,
) -> list[Series]:
    """The ok runs of the selected cells, each cell on each host a series in time order, with
    its change points."""
    return _grouped(_rows(wheres, workload, platform), host)


def _grouped(runs: Iterable[tuple[datetime, str, Sequence[Any]]], host: str | None) -> list[Series]:
    """Runs (when, key, the listing's _READ fields), oldest first, as series."""
    grouped: dict[tuple[str, str, str], tuple[str, str, list[history.Point]]] = {}
    for at, key, row in runs:
        words, name_platform, hostname, cell, rate, flags, unit, interval, software = row
        if (host is not None and hostname != host) or not rate:
            continue
        group = (cell, name_platform, hostname)
        if (held := grouped.get(group)) is None:  # named by its first run: repeat 0
            held = grouped[group] = (f"{words} on {name_platform}, {hostname}", f"{unit}/s", [])
        points = held[2]
        low_high = (interval[0], interval[1]) if interval else None
        found = _Software(sys.intern(software))  # a host's runs mostly ran the same
        points.append(history.Point(at, key, rate, bool(flags), found, low_high, tuple(flags)))
    return [
        Series(name, hostname, unit, points, history.changes(points))
        for (_, _, hostname), (name, unit, points) in sorted(grouped.items(), key=lambda g: g[1][0])
    ]


def _rows(
    wheres: Sequence[Path | str] | None, workload: str | None, platform: str | None
) -> Iterator[tuple[datetime, str, list[Any]]]:
    """(when, key, the listing's _READ fields) of each ok run, oldest first, each once over the
    databases (report.database.projected)."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, ResultStore)
        for at, key, row in projected(stores, _READ, (workload, platform, "ok")):
            yield datetime.fromisoformat(at), key, row


class _Software(Mapping[str, str]):
    """A run's software, read from its listing's JSON when first looked at: only the runs around
    a change are (a site's 100,000 parsed took a second)."""

    __slots__ = ("_found", "_text")  # one for each run: a site's million

    def __init__(self, text: str) -> None:
        self._text = text
        self._found: dict[str, str] | None = None

    def _parsed(self) -> dict[str, str]:
        if self._found is None:
            self._found = json.loads(self._text)
        return self._found

    def __getitem__(self, name: str) -> str:
        return self._parsed()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._parsed())

    def __len__(self) -> int:
        return len(self._parsed())

    @property
    def text(self) -> str:
        return self._text


def moved(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """What moved between two runs' software: none, unparsed, where their stored texts agree
    (a site's consecutive runs mostly do)."""
    if isinstance(before, _Software) and isinstance(after, _Software) and before.text == after.text:
        return {}
    return history.moved_between(before, after)


def period(text: str) -> Callable[[history.Point], bool]:
    """Which runs a period holds: FIELD=VALUE (a captured software field, torch=2.14.1), a day
    (2026-11-15) or days (2026-11-01..2026-11-14, either end left open)."""
    if "=" in text:
        name, _, value = text.partition("=")
        return lambda p: p.software.get(name.strip()) == value.strip()
    start, dots, end = text.partition("..")
    try:
        first = date.fromisoformat(start) if start else date.min
        last = date.fromisoformat(end) if end else date.max
    except ValueError:
        raise AccelbenchError(
            f"--between {text!r}: give a day (2026-11-15), days (2026-11-01..2026-11-14) or "
            "a captured field's value (torch=2.14.1)"
        ) from None
    if not dots:
        last = first
    return lambda p: first <= p.at.date() <= last


def between_lines(found: Sequence[Series], first: str, second: str) -> list[str]:
    """Each series' runs in the second period against the first's."""
    out = []
    a, b = period(first), period(second)
    for s in found:
        ratio = history.between(s.points, a, b)
        if ratio is None:
            out.append(f"{s.name}: fewer than two unflagged runs in {first} or in {second}")
            continue
        out.append(
            f"{s.name}: {second} against {first}: {ratio.pct:+.1f}% "
            f"[{ratio.low_pct:+.1f}, {ratio.high_pct:+.1f}] ({ratio.second} runs against "
            f"{ratio.first})"
        )
    return out


def lines(found: Sequence[Series], runs: bool = False) -> list[str]:
    """Each series' runs and change points in words; with `runs`, each run too: its rate with
    its interval, its verdict, and the software it ran (the first) or what moved since the
    run before."""
    out = []
    for s in found:
        used = sum(not p.flagged for p in s.points)
        out.append(f"{s.name}: {len(s.points)} runs ({len(s.points) - used} flagged, not used)")
        if runs:
            out.extend(f"  {line}" for line in _run_lines(s))
        if not s.changes:
            out.append("  no change point")
        for change in s.changes:
            before, after = s.points[change.index - 1], s.points[change.index]
            out.append(
                f"  change {change.text()} between {before.at:%Y-%m-%d %H:%M} and "
                f"{after.at:%Y-%m-%d %H:%M} (p={change.p:.1g}): {change.cause}"
            )
    return out


def _run_lines(s: Series) -> Iterator[str]:
    for i, (p, since) in enumerate(zip(s.points, _moves(s), strict=True)):
        shown = f"{p.at:%Y-%m-%d %H:%M}  {rate_text(p.value)} {s.unit}"
        if p.interval:
            shown += f" [{rate_text(p.interval[0])}, {rate_text(p.interval[1])}]"
        shown += f"  {p.verdict}"
        if i == 0:
            shown += f"  ({', '.join(f'{k} {v}' for k, v in sorted(p.software.items()))})"
        elif since:
            shown += f"  ({', '.join(f'{k} {a} -> {b}' for k, (a, b) in since.items())})"
        yield shown


def _moves(s: Series) -> list[dict[str, tuple[str, str]]]:
    """What moved at each run since the run before (nothing at the first)."""
    return [{}, *(moved(a.software, b.software) for a, b in itertools.pairwise(s.points))]


def document(found: Sequence[Series]) -> HistoryAnswer:
    """The JSON answer: each series' runs and change points."""
    return HistoryAnswer(
        series=[
            HistorySeries(
                cell=s.name,
                host=s.host,
                unit=s.unit,
                software=dict(s.points[0].software) if s.points else {},
                runs=[
                    HistoryRun(
                        at=p.at.isoformat(),
                        key=p.key,
                        value=p.value,
                        interval=list(p.interval) if p.interval else None,
                        flagged=p.flagged,
                        verdict=p.verdict,
                        moved={k: list(v) for k, v in since.items()},
                    )
                    for p, since in zip(s.points, _moves(s), strict=True)
                ],
                changes=[
                    HistoryChange(
                        at=s.points[c.index].at.isoformat(),
                        pct=c.pct,
                        interval_pct=[c.low_pct, c.high_pct],
                        p=c.p,
                        moved={k: list(v) for k, v in c.moved.items()},
                    )
                    for c in s.changes
                ],
            )
            for s in found
        ]
    )


FIGURE_RUNS = 6
"""The runs a series needs, on two days or more, for the report to draw it."""
MOST_FIGURES = 12
"""The report draws at most this many series: those with a change point first, then those
with the most runs (`accelbench history` lists every one)."""


def plots(source: Source) -> list[Plot]:
    """The report's history figures: each drawn series' rate over time with its runs' intervals,
    flagged runs hollow, and each change point marked with its size and what moved. The series
    are the report's own listings in the order they were stored."""
    made = source.made
    ok = sorted((r for r in source.rows.rows if r.status == "ok"), key=lambda r: made[r.key])
    read = attrgetter(*_READ)
    runs = [(datetime.fromisoformat(made[r.key]), r.key, read(r)) for r in ok]
    found = _grouped(runs, None)
    drawn = [
        s
        for s in found
        if len(s.points) >= FIGURE_RUNS and len({p.at.date() for p in s.points}) > 1
    ]
    drawn.sort(key=lambda s: (not s.changes, -len(s.points)))
    return [_plot(s, len(drawn)) for s in drawn[:MOST_FIGURES]]


def _plot(s: Series, among: int) -> Plot:
    from matplotlib.dates import date2num

    from accelbench.report.drawing import finish, new_figure, slug

    fig, (ax,) = new_figure()
    ax.xaxis_date()
    for flagged in (False, True):
        runs = [p for p in s.points if p.flagged == flagged]
        if not runs:
            continue
        low = [p.value - p.interval[0] if p.interval else 0.0 for p in runs]
        high = [p.interval[1] - p.value if p.interval else 0.0 for p in runs]
        ax.errorbar(
            date2num([p.at for p in runs]),
            [p.value for p in runs],
            yerr=[low, high],
            fmt="o",
            color="tab:blue",
            mfc="none" if flagged else "tab:blue",
            ms=5,
            capsize=2,
            label="flagged (not used)" if flagged else "run",
        )
    changed = {c.index for c in s.changes}
    for i, (before, after) in enumerate(itertools.pairwise(s.points), 1):
        moving = moved(before.software, after.software)
        if moving and i not in changed:  # a version that moved with no change in the rate
            ax.axvline(date2num(after.at), color="grey", ls=":", lw=1)
            ax.annotate(
                ", ".join(f"{k} {new}" for k, (_, new) in moving.items()),
                (date2num(after.at), 0.02),
                xycoords=("data", "axes fraction"),
                fontsize=6,
                color="grey",
                rotation=90,
                va="bottom",
                ha="right",
            )
    for c in s.changes:
        at = s.points[c.index].at
        ax.axvline(date2num(at), color="crimson", ls="--", lw=1)
        ax.annotate(
            f"{c.text()}\n{c.cause}",
            (date2num(at), 1.0),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            color="crimson",
            va="top",
            ha="left",
            xytext=(3, -2),
            textcoords="offset points",
        )
    finish(ax, "date of the run", s.unit)
    fig.autofmt_xdate()
    title = f"History: {s.name}"
    ax.set_title(title, fontsize=10)
    changes = f"{len(s.changes)} change point(s)" if s.changes else "no change point"
    shown = f"; {among - MOST_FIGURES} other series are listed by `accelbench history`"
    caption = (
        f"{len(s.points)} runs, {changes}: the rate of each run with its 95% interval, flagged "
        "runs hollow (never used to find a change), each change dashed with its size and "
        "interval and the captured software that moved there, and software that moved with no "
        "change in the rate dotted" + (shown if among > MOST_FIGURES else "")
    )
    return Plot(slug("history", s.name), title, caption, fig)


class HistoryRun(Frozen):
    at: str
    """When it was stored (ISO 8601)."""
    key: str
    value: float
    interval: list[float] | None
    """The rate's 95% interval within the run, [low, high]; null where it has none."""
    flagged: bool
    """Whether a verdict flagged it: never used to find a change."""
    verdict: str
    """valid, or what flagged it (contended, noisy, ...)."""
    moved: dict[str, list[str]]
    """Each captured software field that changed since the run before: [old, new] ("-" for
    one absent on a side); empty for the first run (its series' software)."""


class HistoryChange(Frozen):
    at: str
    """Its first run after the change."""
    pct: float
    interval_pct: list[float]
    p: float
    """Welch's p-value."""
    moved: dict[str, list[str | None]]
    """Each captured field that changed there: [old, new]."""


class HistorySeries(Frozen):
    cell: str
    host: str
    unit: str
    software: dict[str, str]
    """The software its first run ran: each package version, the driver, CUDA, cuDNN, the OS,
    Python, the threads, numeric variables ($NAME); the runs say what moved after."""
    runs: list[HistoryRun]
    changes: list[HistoryChange]


class HistoryAnswer(Frozen):
    """`accelbench history --format json` (report.history.document)."""

    format: Literal["accelbench-history"] = "accelbench-history"
    version: Literal[2] = 2
    series: list[HistorySeries]
