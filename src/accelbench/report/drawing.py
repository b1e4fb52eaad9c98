"""matplotlib for the report's figures: the style, a new figure, one series' points with their
verdicts and intervals, the axes' finish, and the Plot that renders to bytes. matplotlib is
imported only when a figure is drawn."""

from __future__ import annotations

import io
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.analysis import validity
from accelbench.records.result import Result
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
        with style():
            fit(self.figure)
            # No creation date in the file: the same results draw the same bytes.
            metadata = {"Date": None} if fmt in ("svg", "pdf") else {}
            self.figure.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata)
        return buffer.getvalue()


DPI = 120
"""What the figures are drawn at (PNG's pixels; text is measured at it)."""


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
        fig = Figure(figsize=(6.4 * ncols, 4.2))  # no layout engine: fit() places the axes
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
    """The axes' legend; fit() puts it in the corner where it hides fewest points."""
    ax.legend(fontsize=7)


PAD_PT = 4.0
"""Between a text and what it labels, and between a text and the figure's edge (points)."""
TICK_PT = 3.5 + 3.5
"""A tick's length and its label's pad, as the style draws them (points)."""
CORNERS = ("upper right", "upper left", "lower left", "lower right")
"""Where fit() may put a legend, in the order matplotlib's "best" tries them (ties: the first)."""


def fit(fig: Figure) -> None:
    """Place the figure's axes, in a row, so that each tick label, axis label and title fits
    inside it, and each legend in the corner of its axes that holds fewest of the lines' points.
    Margins come from each text measured alone. matplotlib's constrained layout and its "best"
    legend search each lay out every artist of the figure, in a pass of their own: a site
    report's 61 figures (100k results) drew in 11.6-12.6 s of CPU with both, 5.3-6.6 s without."""
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    # Measured at the dpi drawn at: hinted glyphs are wider at 120 dpi than at 72.
    renderer, point = RendererAgg(1, 1, DPI), 72 / DPI

    def size(text: str, font: FontProperties, rotation: float = 0.0) -> tuple[float, float]:
        """The text's width and height in points, multi-line and rotated as drawn."""
        lines = text.split("\n")
        sizes = [
            renderer.get_text_width_height_descent(t or " ", font, ismath=False) for t in lines
        ]
        w = max(s[0] for s in sizes) * point
        h = len(lines) * max(s[1] for s in sizes) * point * 1.2
        turn = math.radians(rotation)
        return abs(w * math.cos(turn)) + abs(h * math.sin(turn)), abs(w * math.sin(turn)) + abs(
            h * math.cos(turn)
        )

    axes = [ax for ax in fig.axes if ax.get_visible()]
    width, height = (float(v) * 72 for v in fig.get_size_inches())
    needs = [_margins(ax, size) for ax in axes]
    top = max(n[2] for n in needs)
    if title := fig.get_suptitle():
        top += size(title, FontProperties(size=rcParams["figure.titlesize"]))[1] + PAD_PT
    bottom = max(n[1] for n in needs)
    gaps = [a[3] + b[0] for a, b in itertools.pairwise(needs)]
    tall = height - top - bottom

    def place(right: float) -> float:
        """Place the axes with this right margin; their width."""
        wide = (width - needs[0][0] - right - sum(gaps)) / len(axes)
        x = needs[0][0]
        for ax, gap in zip(axes, [*gaps, 0.0], strict=True):
            ax.set_position((x / width, bottom / height, wide / width, tall / height))
            x += wide + gap
        return wide

    wide = place(needs[-1][3])
    if (spill := _spill(axes[-1], size, wide) + PAD_PT) > needs[-1][3]:
        wide = place(spill)  # a label beside the last points, made room for
    for ax in axes:
        if (legend := ax.get_legend()) is not None:
            legend.set_loc(_emptiest(ax, legend, size, wide, tall))
        if title := ax.get_title():  # one wider than its axes: moved along, inside the figure
            w, left = size(title, ax.title.get_fontproperties())[0], ax.get_position().x0 * width
            low, high = PAD_PT - left + w / 2, width - PAD_PT - left - w / 2
            centre = wide / 2 if low > high else min(max(wide / 2, low), high)
            ax.title.set_x(centre / wide)


Measure = Callable[..., tuple[float, float]]


def _margins(ax: Axes, size: Measure) -> tuple[float, float, float, float]:
    """What the axes need around them, in points: left, bottom, top and right."""
    yw = max((size(t, f, r)[0] for t, f, r in _tick_labels(ax.yaxis)), default=0.0)
    xs = _tick_labels(ax.xaxis)
    xh = max((size(t, f, r)[1] for t, f, r in xs), default=0.0)
    # The first and last x labels stand half out of the axes (a rotated one, right-aligned,
    # all to its left).
    xw = [size(t, f, r)[0] for t, f, r in xs]
    turned = bool(xs) and xs[0][2] != 0
    left_x = (xw[0] if turned else xw[0] / 2) if xw else 0.0
    right_x = 0.0 if turned or not xw else xw[-1] / 2
    ylabel = size(ax.get_ylabel(), ax.yaxis.label.get_fontproperties())[1] if ax.get_ylabel() else 0
    xlabel = size(ax.get_xlabel(), ax.xaxis.label.get_fontproperties())[1] if ax.get_xlabel() else 0
    title = ax.get_title()
    above = size(title, ax.title.get_fontproperties())[1] + 6.0 if title else 0.0
    left = PAD_PT + max(left_x, TICK_PT + yw + (ylabel + PAD_PT if ylabel else 0.0))
    bottom = PAD_PT + TICK_PT + xh + (xlabel + PAD_PT if xlabel else 0.0)
    return left, bottom, PAD_PT + above + 4.0, PAD_PT + max(right_x, 4.0)


def _spill(ax: Axes, size: Measure, wide: float) -> float:
    """How far past the right edge of axes `wide` points wide its annotations reach (a flag's
    label beside the last point; one left out of the layout, as a bar's, is not counted)."""
    from matplotlib.text import Annotation

    to_axes = ax.transScale + ax.transLimits
    most = 0.0
    for text in ax.texts:
        if not isinstance(text, Annotation) or not text.get_in_layout():
            continue
        where: Any = text.xycoords
        coords = where if isinstance(where, str) else where[0]
        if coords != "data":
            continue
        x = to_axes.transform((text.xy[0], 0.0))[0]
        offset = text.xyann[0] if text.anncoords == "offset points" else 0.0
        w = size(text.get_text(), text.get_fontproperties(), text.get_rotation())[0]
        reach = {"left": w, "center": w / 2}.get(text.get_horizontalalignment(), 0.0)
        most = max(most, x * wide + offset + reach - wide)
    return most


def _tick_labels(axis: Any) -> list[tuple[str, Any, float]]:
    """The major tick labels the axis will draw, each with its font and rotation, from its
    locator and formatter (no tick is laid out for them)."""
    low, high = sorted(axis.get_view_interval())
    span = (high - low) * 1e-9
    locs = list(axis.get_major_locator()())
    formatter = axis.get_major_formatter()
    formatter.set_locs(locs)
    label = axis.majorTicks[0].label1
    font, rotation = label.get_fontproperties(), label.get_rotation()
    return [
        (text, font, rotation)
        for i, v in enumerate(locs)
        if low - span <= v <= high + span and (text := formatter(v, i))
    ]


def _emptiest(ax: Axes, legend: Any, size: Measure, wide: float, tall: float) -> Any:
    """The corner of the axes (CORNERS) whose legend-sized box holds fewest of the points of
    its lines, error bars and bars' edges, and of points along their segments (axes of `wide`
    by `tall` points)."""
    import numpy as np

    texts = legend.get_texts()
    if not texts:
        return CORNERS[0]
    em = texts[0].get_fontsize()
    sizes = [size(t.get_text(), t.get_fontproperties()) for t in texts]
    # matplotlib's legend: border pad 0.4 em, handle 2 em and its pad 0.8 em, label spacing
    # 0.5 em, 0.5 em from the axes' edge.
    box_w = (max(w for w, _ in sizes) + 3.6 * em + 0.5 * em) / wide
    box_h = (sum(h for _, h in sizes) + (0.5 * (len(texts) - 1) + 0.8 + 0.5) * em) / tall
    to_axes = ax.transAxes.inverted()  # from the display, where each artist's transform ends

    def placed(artist: Any, xy: Any, joined: bool) -> Any:
        """The points in the axes' fraction, and where `joined` points along each segment."""
        xy = to_axes.transform(artist.get_transform().transform(np.asarray(xy, dtype=float)))
        if not joined or len(xy) < 2:
            return xy
        steps = np.linspace(0, 1, 8, endpoint=False)[:, None, None]
        return np.concatenate([(xy[:-1] + steps * (xy[1:] - xy[:-1])).reshape(-1, 2), xy[-1:]])

    found = [np.empty((0, 2))]
    for line in ax.get_lines():
        if len(xy := np.asarray(line.get_xydata())):
            found.append(placed(line, xy, line.get_linestyle() not in ("None", "none", "", " ")))
    for collection in ax.collections:  # error bars' segments
        segments: list[Any] = getattr(collection, "get_segments", list)()
        found += [placed(collection, s, joined=True) for s in segments if len(s)]
    found += [placed(p, p.get_path().vertices, joined=True) for p in ax.patches]  # bars' edges
    points = np.concatenate(found)
    x, y = points[:, 0], points[:, 1]
    counts = []
    for corner in CORNERS:
        in_x = x >= 1 - box_w if "right" in corner else x <= box_w
        in_y = y >= 1 - box_h if "upper" in corner else y <= box_h
        counts.append(int(np.count_nonzero(in_x & in_y)))
    return CORNERS[counts.index(min(counts))]


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
