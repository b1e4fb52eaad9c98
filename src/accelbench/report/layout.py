"""Where a report figure's parts go: its axes placed so that every label and title fits, each
legend in the emptiest corner of its axes. Texts are measured one at a time, as matplotlib
draws them, with no layout engine or legend search (each of which lays out every artist of the
figure in a pass of its own)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 120
"""What the figures are drawn at (PNG's pixels; text is measured at it)."""
PAD_PT = 4.0
"""Between a text and what it labels, and between a text and the figure's edge (points)."""
TICK_PT = 3.5 + 3.5
"""A tick's length and its label's pad, as the style draws them (points)."""
Corner = Literal["upper right", "upper left", "lower left", "lower right"]
CORNERS: tuple[Corner, ...] = ("upper right", "upper left", "lower left", "lower right")
"""Where fit() may put a legend, in the order matplotlib's "best" tries them (ties: the first)."""


def fit(fig: Figure) -> None:
    """Place the figure's axes, in a row, so that each tick label, axis label and title fits
    inside it, and each legend in the corner of its axes that holds fewest of what is drawn.
    Margins come from each text measured alone. matplotlib's constrained layout and its "best"
    legend search each lay out every artist of the figure, in a pass of their own: a site
    report's 61 figures (100k results) drew in 11.6-12.6 s of CPU with both, 5.3-6.6 s without."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties

    point = 72 / DPI

    def size(text: str, font: FontProperties, rotation: float = 0.0) -> tuple[float, float]:
        """The text's width and height in points, multi-line and rotated as drawn."""
        lines = text.split("\n")
        sizes = [_extent(t or " ", font.copy()) for t in lines]
        w = max(s[0] for s in sizes) * point
        h = len(lines) * max(s[1] for s in sizes) * point * 1.2
        turn = math.radians(rotation)
        return abs(w * math.cos(turn)) + abs(h * math.sin(turn)), abs(w * math.sin(turn)) + abs(
            h * math.cos(turn)
        )

    axes = [ax for ax in fig.axes if ax.get_visible()]
    if not axes:
        return
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


@lru_cache(maxsize=4096)
def _extent(line: str, font: Any) -> tuple[float, float]:
    """A line's width and height in pixels at the dpi drawn at (hinted glyphs are wider at
    120 dpi than at 72), measured once for every figure: a site report's 61 figures measure
    3,250 lines, all but 179 of them a tick or legend label measured before, at 0.2-1 ms each
    on this host's FreeType. `font` is a copy: a FontProperties' hash follows its mutable
    state."""
    w, h, _ = _renderer().get_text_width_height_descent(line, font, ismath=False)
    return w, h


@cache
def _renderer() -> Any:
    from matplotlib.backends.backend_agg import RendererAgg

    return RendererAgg(1, 1, DPI)


@contextmanager
def measured_once() -> Iterator[None]:
    """Within it, an SVG's texts measured once for every figure drawn, as fit() measures
    them. matplotlib keeps a text's size for the renderer that measured it, and savefig makes a
    renderer for each figure, so every figure measured its tick and legend labels again: a site
    report's 61 figures measured 1,874 texts as they were drawn, 0.5-1.1 s of their 3.7-3.9 s.
    An SVG text's size depends on the text, its font and whether it is math, not on the
    renderer (RendererSVG asks a TextToPath of its own)."""
    from matplotlib.backends.backend_svg import RendererSVG

    own = RendererSVG.get_text_width_height_descent
    RendererSVG.get_text_width_height_descent = _svg_extent  # type: ignore[method-assign]
    try:
        yield
    finally:
        RendererSVG.get_text_width_height_descent = own  # type: ignore[method-assign]


def _svg_extent(_renderer: Any, text: str, font: Any, ismath: Any) -> tuple[float, float, float]:
    return _svg_measured(text, font.copy(), ismath)  # a copy, as in _extent


@lru_cache(maxsize=4096)
def _svg_measured(text: str, font: Any, ismath: Any) -> tuple[float, float, float]:
    return _text_path().get_text_width_height_descent(text, font, ismath)


@cache
def _text_path() -> Any:
    from matplotlib.textpath import TextToPath

    return TextToPath()


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


def _emptiest(ax: Axes, legend: Any, size: Measure, wide: float, tall: float) -> Corner:
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
