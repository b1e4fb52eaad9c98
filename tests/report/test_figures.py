from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from accelbench.analysis import validity
from accelbench.records.contention import HostActivity
from accelbench.records.result import Result, result_key
from accelbench.report import document, figures
from accelbench.scenarios.time_to_train import EvalPoint, TimeToTrain

from ..conftest import BUSY_HOST, SIM_PLATFORM, on_platform, rate, with_rate


def svg_text(plot: figures.Plot) -> str:
    """Every text element of the plot's SVG, which must parse as XML."""
    root = ET.fromstring(plot.render("svg"))
    return "\n".join(t for el in root.iter() for t in [el.text] if t)


def by_name(results: list[Result]) -> dict[str, figures.Plot]:
    return {p.name: p for p in figures.plots(results)}


def test_each_figure_is_drawn_when_the_results_have_its_axis(two_platforms: list[Result]) -> None:
    plots = by_name(two_platforms)
    assert set(plots) == {
        "batch-tiny-mlp-train",
        "batch-tiny-mlp-infer",
        "scaling-tiny-mlp",
        "first-vs-steady",
        "latency-tiny-mlp",
        "efficiency-tiny-mlp",
    }
    single = [r for r in two_platforms if r.spec.batch_size == 4 and r.spec.scenario == "train"]
    assert "batch-tiny-mlp-train" not in by_name(single)  # one batch size: no line to draw


def test_platform_names_are_text_in_the_svg(two_platforms: list[Result]) -> None:
    plot = by_name(two_platforms)["batch-tiny-mlp-train"]
    text = svg_text(plot)
    assert SIM_PLATFORM in text  # parsed back from escaped XML: never markup
    assert plot.render("svg") == plot.render("svg")  # no date inside: the same bytes each time
    assert "out of memory" in text
    assert [t for t in ("4", "16", "64") if t in text.split("\n")] == ["4", "16", "64"]  # ticks


def test_scaling_is_labelled_with_its_efficiency(two_platforms: list[Result]) -> None:
    # the two-replica cell runs 1.8x as fast as one replica: 90% of linear scaling
    text = svg_text(by_name(two_platforms)["scaling-tiny-mlp"]).split("\n")
    assert "90%" in text
    unit = two_platforms[0].metrics.item_unit  # type: ignore[union-attr]
    assert f"{unit}/s" in text  # the workload's unit, on the y axis


def test_flagged_points_carry_their_flag(two_platforms: list[Result]) -> None:
    short = [r for r in two_platforms if r.spec.scenario == "train" and r.metrics]
    assert short[0].metrics is not None
    few = rate(short[0].metrics.items_per_s, None, blocks=3)
    flagged = short[0].model_copy(
        update={"metrics": short[0].metrics.model_copy(update={"delivered": few})}
    )
    text = svg_text(by_name([flagged, *short[1:]])["batch-tiny-mlp-train"])
    assert any(line.startswith("too-short") for line in text.split("\n"))  # and any other flags


def test_a_dollar_in_a_name_is_not_mathtext(two_platforms: list[Result]) -> None:
    renamed = [on_platform(r, "$10 GPU$", 1.0) for r in two_platforms if r.metrics]
    assert "$10 GPU$" in svg_text(by_name(renamed)["batch-tiny-mlp-train"])


def _trained(result: Result, seed: int, seconds: float | None) -> Result:
    assert result.metrics is not None
    point = EvalPoint(
        step=10,
        train_s=seconds or 5.0,
        num_items=40,
        data_passes=0.5,
        train_loss=0.1,
        val_loss=0.01 if seconds else 0.5,
        val_accuracy=None,
    )
    ttt = TimeToTrain(
        target="val_loss<=0.02",
        outcome="reached" if seconds else "not-converged",
        reason="",
        time_to_target_s=seconds,
        steps_to_target=10 if seconds else None,
        items_to_target=40 if seconds else None,
        passes_to_target=0.5 if seconds else None,
        train_s=seconds or 5.0,
        eval_s=0.1,
        num_train_items=80,
        num_held_out_items=20,
        lr=0.01,
        lr_rule="given",
        max_loss=1.0,
        max_loss_step=0,
        curve=[point],
    )
    spec = result.spec.model_copy(
        update={"scenario": "time-to-train", "target": "val_loss<=0.02", "seed": seed}
    )
    return result.model_copy(
        update={"spec": spec, "metrics": result.metrics.model_copy(update={"record": ttt})}
    )


def test_time_to_train_shows_median_and_misses(two_platforms: list[Result]) -> None:
    train = {
        r.spec.batch_size: r
        for r in two_platforms
        if r.spec.scenario == "train"
        and r.metrics
        and r.spec.replicas == 1
        and SIM_PLATFORM not in r.env.platform
    }
    runs = [_trained(train[4], s, t) for s, t in ((0, 2.0), (1, 4.0), (2, 3.0))]
    runs += [_trained(train[64], s, None) for s in (0, 1)]
    plot = by_name(runs)["time-to-train-tiny-mlp"]
    text = svg_text(plot).split("\n")
    assert "3/3" in text  # reached by every seed, drawn at their median
    assert any("target not reached" in t for t in text)


def test_throughput_points_carry_their_interval(two_platforms: list[Result]) -> None:
    # Intervals set here: whether a measured run has one depends on the host's load.
    results = [
        with_rate(r, r.items_per_s or 1.0) if r.spec.scenario == "train" and r.metrics else r
        for r in two_platforms
    ]
    plot = by_name(results)["batch-tiny-mlp-train"]
    (ax,) = plot.figure.axes
    from matplotlib.container import ErrorbarContainer

    series = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    bars = [segment for c in series for segment in c.lines[2][0].get_segments()]
    with_interval = [r for r in results if r.spec.scenario == "train" and r.items_per_s_ci]
    assert with_interval and len(bars) == len(with_interval)
    assert len(series) < len(bars)  # a series' bars are one artist, not one a point


def test_a_crowd_of_flag_labels_becomes_one_line_under_the_axis() -> None:
    from accelbench.report import drawing

    def flagged(count: int) -> list[str]:
        _, (ax,) = drawing.new_figure()
        for i in range(count):
            ax.annotate("too-short", (i, 1.0), gid=drawing.FLAG_LABEL)
        drawing.finish(ax, "micro batch", "items/s")
        return [t.get_text() for t in ax.texts] + [ax.get_xlabel()]

    few = flagged(drawing.MOST_FLAG_LABELS)
    assert few.count("too-short") == drawing.MOST_FLAG_LABELS and few[-1] == "micro batch"
    many = flagged(drawing.MOST_FLAG_LABELS + 1)
    assert "too-short" not in many
    assert many == [
        f"micro batch\n{drawing.MOST_FLAG_LABELS + 1} flagged points (hollow): their flags are in the verdicts"
    ]


def test_a_target_never_reached_is_drawn_at_the_top_not_at_zero(
    two_platforms: list[Result],
) -> None:
    train = next(r for r in two_platforms if r.spec.scenario == "train" and r.metrics)
    runs = [_trained(train, s, t) for s, t in ((0, 2.0), (1, 4.0))]
    bigger = train.model_copy(update={"spec": train.spec.model_copy(update={"batch_size": 64})})
    runs += [_trained(bigger, 0, None)]
    plot = by_name(runs)["time-to-train-tiny-mlp"]
    plot.render("svg")  # lays the axes out
    (ax,) = plot.figure.axes
    (miss,) = [line for line in ax.get_lines() if "target not reached" in str(line.get_label())]
    _, y = miss.get_transform().transform((64, miss.get_ydata()[0]))  # type: ignore[arg-type, index]
    assert abs(y - ax.bbox.y1) < 1  # at the top edge of the axes, in display units


def _quiet(result: Result, host: HostActivity | None = None, **spec: object) -> Result:
    """`result` with no input wait (a tiny model's loader is the limit on a loaded host), the
    given host activity and `spec` changed."""
    assert result.metrics is not None
    metrics = result.metrics.model_copy(update={"input_wait_frac": 0.0, "host": host})
    new_spec = result.spec.model_copy(update=spec)
    return result.model_copy(update={"metrics": metrics, "spec": new_spec})


def _drawn_ys(plot: figures.Plot) -> set[float]:
    """Every y value the plot's first axes draws (its lines and markers)."""
    ax = plot.figure.axes[0]
    return {round(float(y), 6) for line in ax.get_lines() for y in np.asarray(line.get_ydata())}


def test_a_valid_result_is_drawn_instead_of_a_contended_repeat(
    two_platforms: list[Result],
) -> None:
    here = [r for r in two_platforms if r.spec.scenario == "train" and r.env.device_type == "cpu"]
    base = [_quiet(r) for r in here if r.spec.replicas == 1 and r.metrics]
    valid = _quiet(with_rate(base[0], 8835.0))
    assert validity.verdict_text(valid) == "valid"
    # Two contended repeats of the same cell outvote the valid one in a plain median.
    busy = [
        _quiet(with_rate(base[0], v), host=BUSY_HOST, repeat=i + 1)
        for i, v in enumerate((152.0, 160.0))
    ]
    busy = [r.model_copy(update={"key": result_key(r.spec, r.env)}) for r in busy]
    plot = by_name([valid, *busy, *base[1:]])["batch-tiny-mlp-train"]
    assert 8835.0 in _drawn_ys(plot)
    assert not {152.0, 160.0} & _drawn_ys(plot)
    assert "Left out: 2 flagged result(s) (contended" in plot.caption
    page = document.page([valid, *busy, *base[1:]], [plot], [])
    assert "Left out: 2 flagged result(s) (contended" in page


def test_runs_that_differ_in_a_knob_are_lines_of_their_own(two_platforms: list[Result]) -> None:
    here = [r for r in two_platforms if r.spec.scenario == "train" and r.env.device_type == "cpu"]
    base = [r for r in here if r.spec.replicas == 1 and r.metrics]
    one_thread = [
        on_platform(r, None, 58.0, threads=1, epochs=3)
        for r in base  # the same cells, with --threads 1 and a third epoch
    ]
    plot = by_name([*base, *one_thread])["batch-tiny-mlp-train"]
    labels = plot.figure.axes[0].get_legend_handles_labels()[1]
    assert sum("epochs=3 threads=1" in name for name in labels) == 1
    assert sum("epochs=2 threads=default" in name for name in labels) == 1
    ys = _drawn_ys(plot)
    assert all(round(r.items_per_s or 0, 6) in ys for r in [*base, *one_thread])
