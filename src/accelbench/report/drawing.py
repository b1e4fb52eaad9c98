"""matplotlib for the report's figures: the style, a new figure, one series' points with their
verdicts and intervals, the axes' finish, and the Plot that renders to bytes. matplotlib is
imported only when a figure is drawn."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.analysis import validity
from accelbench.records.result import Result
from accelbench.report import layout
from accelbench.report.cells import differing, settings

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

STYLE: dict[str, Any] = {
    "text.parse_math": False,  # a '$' in a workload or platform name is text, not TeX
    "svg.fonttype": "none",  # text stays text: smaller files, selectable in a browser
    "svg.hashsalt": "accelbench",  # the same results draw the same bytes
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 9,
    # A title at a fixed height: its automatic place (above any tick labels on top, which no
    # figure here has) measured every axis again, an eighth of a site report's drawing.
    "axes.titley": 1.0,
}


T = TypeVar("T")


@dataclass(frozen=True)
class Plot:
    name: str
    """A file name stem: letters, digits and dashes."""
    title: str
    caption: str
    figure: Figure

    def render(self, fmt: str) -> bytes:
        """The figure as svg or png bytes."""
        buffer = io.BytesIO()
        with style(), layout.measured_once():
            layout.fit(self.figure)
            # No creation date in the file: the same results draw the same bytes.
            metadata = {"Date": None} if fmt in ("svg", "pdf") else {}
            self.figure.savefig(buffer, format=fmt, dpi=layout.DPI, metadata=metadata)
        return buffer.getvalue()


_VERDICTS: ContextVar[Mapping[str, str] | None] = ContextVar("verdicts", default=None)


def verdict(result: Result) -> str:
    """The result's verdict as the report's table gives it where the figures are drawn under
    judged() (its cell's repeats' spread counted: a noisy cell is flagged in both), else its
    own (validity.verdict_text)."""
    verdicts = _VERDICTS.get()
    return (verdicts and verdicts.get(result.key)) or validity.verdict_text(result)


@contextmanager
def judged(verdicts: Mapping[str, str]) -> Iterator[None]:
    """Draw with these verdicts, by key (report.results.Rows.verdicts)."""
    token = _VERDICTS.set(verdicts)
    try:
        yield
    finally:
        _VERDICTS.reset(token)


@contextmanager
def style() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(STYLE):  # type: ignore[arg-type]
        yield


def new_figure(ncols: int = 1) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure  # no pyplot: no global state, no display

    with style():  # the axes take the style as they are made, wherever they are drawn
        fig = Figure(figsize=(6.4 * ncols, 4.2))  # no layout engine: layout.fit() places the axes
        return fig, list(fig.subplots(1, ncols, squeeze=False)[0])


def slug(*parts: object) -> str:
    return re.sub(r"[^a-z0-9]+", "-", "-".join(map(str, parts)).lower()).strip("-")[:80]


def group_by(items: Sequence[T], key: Callable[[T], Any]) -> dict[Any, list[T]]:
    groups: dict[Any, list[T]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return dict(groups)


def series_name(
    r: Result,
    *,
    devices: bool = True,
    replicas: bool = True,
    batch: bool = False,
    knobs: Sequence[str] = (),
) -> str:
    """A line's name: the platform, the configuration less what the x axis shows, and the
    `knobs` (cells.differing) that tell it from the figure's other lines."""
    return (
        f"{r.platform} {settings(r.spec, knobs, batch=batch, devices=devices, replicas=replicas)}"
    )


def namer(results: Sequence[Result], **axes: bool) -> Callable[[Result], str]:
    """series_name for a figure of these results: every knob that differs among them becomes
    part of the name, so differently configured runs are never pooled into one line."""
    knobs = differing(r.spec for r in results)
    return lambda r: series_name(r, knobs=knobs, **axes)


def points(
    ax: Axes,
    xs: Sequence[float],
    ys: Sequence[float],
    results: Sequence[Result],
    color: Any,
    label: str,
    *,
    intervals: bool = False,
) -> None:
    """A line through the points, each marked by its verdict; with `intervals`, the points are
    headline throughputs, drawn with their 95% intervals. A series is a few artists whatever its
    length (a line, its error bars, its filled and its hollow markers), and a flag's label one
    more per flagged point: a site's figure of hundreds of points draws in a second."""
    ax.plot(xs, ys, "-", color=color, label=label, alpha=0.8)
    verdicts = [verdict(r) for r in results]
    if intervals:
        bars = [
            (x, y, ci)
            for x, y, r in zip(xs, ys, results, strict=True)
            if (ci := r.items_per_s_ci) is not None
        ]
        if bars:
            bx, by, cis = zip(*bars, strict=True)
            low = [y - ci[0] for y, ci in zip(by, cis, strict=True)]
            high = [ci[1] - y for y, ci in zip(by, cis, strict=True)]
            ax.errorbar(bx, by, yerr=[low, high], fmt="none", color=color, capsize=3, lw=1)
    for valid in (True, False):
        marked = [
            (x, y) for x, y, v in zip(xs, ys, verdicts, strict=True) if (v == "valid") == valid
        ]
        if marked:
            mx, my = zip(*marked, strict=True)
            face = color if valid else "white"
            ax.plot(mx, my, "o", linestyle="none", color=color, markerfacecolor=face, ms=6)
    for x, y, flags in zip(xs, ys, verdicts, strict=True):
        if flags != "valid":
            ax.annotate(
                flags,
                (x, y),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=7,
                color="dimgray",
                gid=FLAG_LABEL,
            )


FLAG_LABEL = "flag"
"""The gid of a flag's label beside its hollow point (points)."""
MOST_FLAG_LABELS = 40
"""The most flag labels an axes keeps: past them they cover each other and the lines, and the
verdicts table says each point's flags (finish replaces them with a line under the axis that
says so)."""


def palette() -> Iterator[Any]:
    import matplotlib

    while True:
        yield from matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]


def colored(groups: dict[str, list[Any]]) -> Iterator[tuple[str, list[Any], Any]]:
    """(series, members, colour), series in name order."""
    colors = palette()
    for series, members in sorted(groups.items()):
        yield series, members, next(colors)


def finish(ax: Axes, xlabel: str, ylabel: str, *, log_x: bool = False) -> None:
    """Labels, legend and a y axis from zero; a log x axis is ticked at the values plotted."""
    from matplotlib.ticker import FixedLocator, NullLocator, StrMethodFormatter

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log_x:
        ax.set_xscale("log", base=2)
        xs: set[float] = set()
        for line in ax.get_lines():
            data: Any = line.get_xdata()
            xs.update(float(x) for x in data if x > 0)
        ax.xaxis.set_major_locator(FixedLocator(sorted(xs)))
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.6g}"))  # 800,000, not 800000
    labels = [t for t in ax.texts if t.get_gid() == FLAG_LABEL]
    if len(labels) > MOST_FLAG_LABELS:
        for label in labels:
            label.remove()
        note = f"{len(labels)} flagged points (hollow): their flags are in the verdicts"
        ax.set_xlabel(f"{xlabel}\n{note}")
    if ax.get_legend_handles_labels()[0]:
        place_legend(ax)


def place_legend(ax: Axes) -> None:
    """The axes' legend; layout.fit() puts it in the corner where it hides fewest points. Made
    in a corner, never "best", so that no draw runs matplotlib's search of every place."""
    ax.legend(fontsize=7, loc=layout.CORNERS[0])


def median_by_x(
    members: Sequence[Result],
    x: Callable[[Result], float],
    left_out: list[Result] | None = None,
) -> list[Result]:
    """One result per x, so a line has one point per x: median_pick of each x's repeats.
    Flagged repeats passed over for a valid one are added to `left_out`."""
    out = []
    for _, group in sorted(group_by(members, x).items()):
        pick, passed = median_pick(group, verdict, lambda r: r.items_per_s)
        out.append(pick)
        if left_out is not None:
            left_out += passed
    return out


def median_pick(
    group: Sequence[T], verdict: Callable[[T], str], rate: Callable[[T], float | None]
) -> tuple[T, list[T]]:
    """The repeat with the median throughput among the valid ones where any is valid (a
    flagged repeat never hides a valid one), else among all; and the flagged repeats passed
    over for a valid one. report.plotted makes the same choice from a few fields per result."""
    valid = [r for r in group if verdict(r) == "valid"]
    pool = sorted(valid or group, key=lambda r: rate(r) or 0)
    chosen = {id(r) for r in valid}
    passed = [r for r in group if id(r) not in chosen] if valid else []
    return pool[(len(pool) - 1) // 2], passed


def left_out_note(left_out: Sequence[Result]) -> str:
    """The caption's account of the flagged repeats median_by_x passed over; blank if none."""
    if not left_out:
        return ""
    flags = sorted({f for r in left_out for f in verdict(r).split(", ")})
    return (
        f" Left out: {len(left_out)} flagged result(s) ({', '.join(flags)}) of settings that "
        "also have a valid result, which is drawn instead."
    )
