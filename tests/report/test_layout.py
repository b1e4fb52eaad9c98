"""The figures' layout: every label and title inside the figure, each legend clear of the
points, on figures made as the report makes them and drawn as it draws them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from accelbench.report import drawing, layout

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def drawn(fig: Figure) -> tuple[Any, Any]:
    """The figure fitted and drawn as render() draws it, and its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with drawing.style():
        layout.fit(fig)
        canvas = FigureCanvasAgg(fig)
        fig.set_dpi(layout.DPI)
        canvas.draw()
    return canvas.get_renderer(), fig.bbox


@pytest.mark.parametrize("kind", ["rates", "long names", "dates", "panels", "flag at the edge"])
def test_every_label_and_title_is_inside_the_figure(kind: str) -> None:
    fig, axes = drawing.new_figure(2 if kind == "panels" else 1)
    for ax in axes:
        ax.plot([1, 2, 4, 8], [1e5, 9e5, 4e6, 8.7e6], label="cluster-0 (AMD EPYC) amp-bf16 bs=8")
        drawing.finish(ax, "micro batch\n3 flagged points (hollow)", "samples/s", log_x=True)
        ax.set_title("autoencoder: train throughput against batch size", fontsize=10)
    if kind == "long names":
        names = [f"cluster-{i} (AMD EPYC) efficientnet_b0, repeat 6 infer bs=8" for i in range(3)]
        axes[0].set_yticks(range(3), names, fontsize=7)
    if kind == "dates":
        axes[0].xaxis_date()
        axes[0].plot([20000.5, 20400.25], [1, 2])
        fig.autofmt_xdate()
    if kind == "panels":
        fig.suptitle("gpt2: energy per item and MFU against batch size", fontsize=10)
    if kind == "flag at the edge":
        axes[0].annotate(
            "noisy, contended, drifting",
            (8, 8.7e6),
            xytext=(4, 4),
            textcoords="offset points",
            fontsize=7,
            gid=drawing.FLAG_LABEL,
        )
    renderer, edge = drawn(fig)
    for ax in axes:
        box = ax.get_tightbbox(renderer)
        assert box is not None
        assert box.x0 >= edge.x0 - 1 and box.y0 >= edge.y0 - 1, kind
        assert box.x1 <= edge.x1 + 1 and box.y1 <= edge.y1 + 1, kind
    if kind == "panels":
        first = axes[0].get_tightbbox(renderer)
        assert first is not None and first.x1 <= axes[1].get_position().x0 * edge.width + 1


@pytest.mark.parametrize("empty", layout.CORNERS)
def test_the_legend_goes_where_it_hides_no_point(empty: str) -> None:
    """Points fill three corners of the axes; the legend takes the fourth."""
    fig, (ax,) = drawing.new_figure()
    corners = {
        "upper right": (1, 1),
        "upper left": (0, 1),
        "lower left": (0, 0),
        "lower right": (1, 0),
    }
    xs, ys = np.meshgrid(np.linspace(0, 0.45, 10), np.linspace(0, 0.45, 10))
    for corner, (cx, cy) in corners.items():
        if corner != empty:
            ax.plot(
                cx * 0.55 + xs.ravel(), cy * 0.55 + ys.ravel(), "o", linestyle="none", label=corner
            )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    drawing.place_legend(ax)
    renderer, _ = drawn(fig)
    legend = ax.get_legend()
    assert legend is not None
    box = legend.get_window_extent(renderer)
    hidden = sum(
        box.count_contains(line.get_transform().transform(line.get_xydata()))
        for line in ax.get_lines()
    )
    assert hidden == 0


def test_a_text_is_measured_once_for_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's figures share their tick and legend labels: fit() measures each once, and
    a figure fitted from what it measured before draws the same bytes."""
    from matplotlib.backends.backend_agg import RendererAgg

    measured: list[str] = []
    real = RendererAgg.get_text_width_height_descent

    def counted(renderer: Any, text: str, *args: Any, **kwargs: Any) -> Any:
        measured.append(text)
        return real(renderer, text, *args, **kwargs)

    monkeypatch.setattr(RendererAgg, "get_text_width_height_descent", counted)
    layout._extent.cache_clear()

    def plot() -> drawing.Plot:
        fig, (ax,) = drawing.new_figure()
        for i in range(3):
            ax.plot([1, 2, 4], [i, i + 1, i + 3], label=f"a line named at length {i}")
        drawing.finish(ax, "micro batch", "items/s", log_x=True)
        return drawing.Plot("p", "t", "c", fig)

    first = plot().render("svg")
    again = len(measured)
    assert again and len(set(measured)) == again  # each text once
    assert plot().render("svg") == first and len(measured) == again


def test_an_svg_draws_each_text_it_measured_before_without_measuring_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """savefig makes a renderer for each figure, and matplotlib keeps a text's size for the
    renderer that measured it: drawn under measured_once(), the second figure measures no text,
    and draws the bytes that a figure measured afresh draws."""
    from contextlib import nullcontext

    from matplotlib.textpath import TextToPath

    measured: list[str] = []
    real = TextToPath.get_text_width_height_descent

    def counted(self: Any, text: str, *args: Any) -> Any:
        measured.append(text)
        return real(self, text, *args)

    monkeypatch.setattr(TextToPath, "get_text_width_height_descent", counted)
    layout._svg_measured.cache_clear()

    def plot() -> drawing.Plot:
        fig, (ax,) = drawing.new_figure()
        ax.plot([1, 2, 4], [3, 1, 2], label="a line named at length")
        drawing.finish(ax, "micro batch", "items/s", log_x=True)
        return drawing.Plot("p", "t", "c", fig)

    first = plot().render("svg")
    assert measured
    before = len(measured)
    assert plot().render("svg") == first and len(measured) == before
    monkeypatch.setattr(layout, "measured_once", nullcontext)
    assert plot().render("svg") == first and len(measured) > before  # measured afresh
