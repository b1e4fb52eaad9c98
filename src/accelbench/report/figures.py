"""The report's figures, drawn with matplotlib from stored results: the seeds' throughput
against batch size per platform, scaling against device count with the ideal linear line, first
against steady epoch, inference latency against throughput, generation's tokens/s per user
against per device, serving's latency and per-user speed against load, time to train against
batch size, and energy and MFU. Each figure is drawn only when the results have its axis.

Every point shows its verdict: a filled marker is a valid result, a hollow one was flagged and
carries the flag's name beside it; throughput points carry their 95% interval as an error bar,
an implausible MFU is not drawn, and a time-to-train target never reached is a cross at the top
of the axis, not at 0 s. matplotlib is imported here only, when a report is drawn."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from accelbench import scenarios
from accelbench.analysis import validity
from accelbench.records.result import Result, measured
from accelbench.report.cells import describer
from accelbench.report.drawing import (
    Plot,
    colored,
    finish,
    group_by,
    judged,
    left_out_note,
    median_by_x,
    namer,
    new_figure,
    palette,
    place_legend,
    points,
    slug,
    style,
    verdict,
)

FLAGGED_NOTE = "filled: valid; hollow: flagged, with the flag beside it (see the verdicts)"
MAX_EPOCH_BARS = 24


def plots(
    results: Sequence[Result],
    drawn: Mapping[str, Sequence[Result]] | None = None,
    verdicts: Mapping[str, str] | None = None,
) -> list[Plot]:
    """Every figure the results have data for; with `drawn` (report.plotted.chosen), each
    figure from its own results instead, the efficiency figure's panels each from theirs. Each
    point carries its verdict as the report's table gives it: `verdicts` by key (the listing's,
    Rows.verdicts), else the results' own with their repeats'."""

    def own(name: str) -> Sequence[Result]:
        return results if drawn is None else drawn.get(name, [])

    if verdicts is None:  # results' listings import roles, which import this: late
        from accelbench.report.results import listed

        verdicts = listed(results)[0].verdicts
    panels = {name: own(f"efficiency/{name}") for name, _ in PANELS}
    joined = list({r.key: r for rs in panels.values() for r in rs}.values())
    own_figures = {f.name: f.draw for s in scenarios.all_scenarios() for f in s.figures}
    with style(), judged(verdicts):
        return [
            *(plot for name, draw in DRAWERS.items() for plot in draw(own(name))),
            *(plot for name, d in own_figures.items() for plot in d(own(name))),
            *efficiency(results if drawn is None else joined, None if drawn is None else panels),
        ]


def throughput_vs_batch(results: Sequence[Result]) -> Iterator[Plot]:
    """Throughput against micro batch, a line per platform, precision and device count; cells
    that ran out of memory are crosses on the x axis."""
    cells = [r for r in results if r.spec.scenario in scenarios.in_view("batch")]
    for (workload, scenario), members in group_by(
        cells, lambda r: (r.spec.workload, r.spec.scenario)
    ).items():
        ran = measured(members)
        if len({r.spec.batch_size for r in ran}) < 2:
            continue
        fig, (ax,) = new_figure()
        left_out: list[Result] = []
        for series, group, color in colored(group_by(ran, namer(ran))):
            line = median_by_x(group, lambda r: r.spec.batch_size, left_out)
            xs = [r.spec.batch_size for r in line]
            points(ax, xs, [r.items_per_s or 0 for r in line], line, color, series, intervals=True)
        ooms = sorted({r.spec.batch_size for r in members if r.status == "oom"})
        if ooms:
            ax.plot(
                ooms,
                [0] * len(ooms),
                "x",
                color="crimson",
                ms=9,
                mew=2,
                clip_on=False,
                label="out of memory",
            )
        unit = ran[0].metrics.item_unit if ran[0].metrics else "items"
        finish(ax, "micro batch", f"{unit}/s", log_x=True)
        title = f"{workload}: {scenario} throughput against batch size"
        ax.set_title(title, fontsize=10)
        note = FLAGGED_NOTE + left_out_note(left_out)
        yield Plot(slug("batch", workload, scenario), title, note, fig)


def scaling(results: Sequence[Result]) -> Iterator[Plot]:
    """Training throughput against device count, with the ideal: the smallest count's
    throughput times the device ratio; each point is labelled with its scaling efficiency."""
    training = measured(results, "scaling")
    for workload, members in group_by(training, lambda r: r.spec.workload).items():
        # A line's layout is fixed (FSDP apart from FSDP x TP, stages named in it); its
        # replicas and nodes grow along the x axis.
        series_of = namer(members, replicas=False, batch=True)
        groups = {
            k: g
            for k, g in group_by(members, series_of).items()
            if len({r.num_devices for r in g}) >= 2
        }
        if not groups:
            continue
        fig, (ax,) = new_figure()
        left_out: list[Result] = []
        for series, group, color in colored(groups):
            line = median_by_x(group, lambda r: r.num_devices, left_out)
            xs = [r.num_devices for r in line]
            ys = [r.items_per_s or 0 for r in line]
            points(ax, xs, ys, line, color, series, intervals=True)
            ideal = [ys[0] * x / xs[0] for x in xs]
            ax.plot(xs, ideal, "--", color=color, alpha=0.5, lw=1)
            for x, y, best in zip(xs[1:], ys[1:], ideal[1:], strict=True):
                ax.annotate(
                    f"{100 * y / best:.0f}%",
                    (x, y),
                    xytext=(0, -12),
                    textcoords="offset points",
                    fontsize=7,
                    ha="center",
                    color=color,
                )
        ax.plot([], [], "--", color="gray", label="ideal linear scaling")
        ax.set_xticks(sorted({r.num_devices for g in groups.values() for r in g}))
        unit = members[0].metrics.item_unit if members[0].metrics else "items"
        finish(ax, "devices", f"{unit}/s")
        title = f"{workload}: scaling with device count (labels: scaling efficiency)"
        ax.set_title(title, fontsize=10)
        yield Plot(slug("scaling", workload), title, FLAGGED_NOTE + left_out_note(left_out), fig)


def first_vs_steady(results: Sequence[Result]) -> Iterator[Plot]:
    """First-epoch throughput (compilation and warm-up inside) beside the steady state."""
    cells = [r for r in measured(results, "first-epoch") if r.metrics and len(r.metrics.epochs) > 1]
    if not cells:
        return
    cells = cells[-MAX_EPOCH_BARS:]
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    fig, (ax,) = new_figure()
    fig.set_figheight(1.2 + 0.28 * len(cells))
    name = describer(r.spec for r in cells)
    names = [f"{r.platform} {name(r.spec)}" for r in cells]
    ys = range(len(cells))
    first = [r.metrics.epochs[0].items_per_s if r.metrics else 0 for r in cells]
    steady = [r.items_per_s or 0 for r in cells]
    ax.barh([y + 0.2 for y in ys], first, height=0.4, color="lightgray", label="first epoch")
    ax.barh([y - 0.2 for y in ys], steady, height=0.4, color="tab:blue", label="steady state")
    for y, r, value in zip(ys, cells, steady, strict=True):
        flags = verdict(r)
        if flags != "valid":
            ax.annotate(
                flags,
                (value, y - 0.2),
                xytext=(3, -3),
                textcoords="offset points",
                fontsize=7,
                color="dimgray",
            ).set_in_layout(False)  # past the longest bar, it would squeeze the axes to nothing
    ax.set_yticks(list(ys), names, fontsize=7)
    ax.invert_yaxis()
    ax.xaxis.set_major_locator(MaxNLocator(4))  # rates of six digits side by side overlap
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel("items/s")
    place_legend(ax)
    title = "First epoch (compilation, warm-up) against steady state"
    ax.set_title(title, fontsize=10)
    yield Plot(
        "first-vs-steady", title, "Flags of flagged results are written beside their bars.", fig
    )


def latency_vs_throughput(results: Sequence[Result]) -> Iterator[Plot]:
    """Inference: p50 and p99 batch latency against throughput, points labelled by batch
    size."""
    shown = measured(results, "latency")
    infer = [r for r in shown if scenarios.get(r.spec.scenario).batch_latency]
    for workload, own in group_by(infer, lambda r: r.spec.workload).items():
        fig, (ax,) = new_figure()
        colors = palette()
        series_of, left_out = namer(own), list[Result]()
        for series, group in sorted(group_by(own, series_of).items()):
            color = next(colors)
            line = median_by_x(group, lambda r: r.spec.batch_size, left_out)
            xs = [r.items_per_s or 0 for r in line]
            p99 = [r.metrics.step_ms_steady.p99 if r.metrics else 0 for r in line]
            points(ax, xs, p99, line, color, f"{series} p99")
            p50 = [r.metrics.step_ms_steady.median if r.metrics else 0 for r in line]
            ax.plot(xs, p50, ":", color=color, label=f"{series} p50")
            for x, y, r in zip(xs, p99, line, strict=True):
                ax.annotate(
                    f"bs={r.spec.batch_size}",
                    (x, y),
                    xytext=(-4, 6),
                    textcoords="offset points",
                    fontsize=7,
                    ha="right",
                )
        finish(ax, "throughput (items/s)", "latency (ms)")
        title = f"{workload}: latency against throughput"
        ax.set_title(title, fontsize=10)
        yield Plot(slug("latency", workload), title, FLAGGED_NOTE + left_out_note(left_out), fig)


def _plausible_mfu_pct(r: Result) -> float | None:
    m = r.metrics
    if m is None or m.mfu is None or m.flops is None or validity.implausible(m.flops, m.mfu):
        return None
    return 100 * m.mfu


def _joules_per_item(r: Result) -> float | None:
    return r.metrics.joules_per_item if r.metrics else None


PANELS: list[tuple[str, Callable[[Result], float | None]]] = [
    ("joules per item", _joules_per_item),
    ("MFU (%)", _plausible_mfu_pct),
]
"""The efficiency figure's panels: each drawn where a result of the workload has its value."""


def efficiency(
    results: Sequence[Result], panels: Mapping[str, Sequence[Result]] | None = None
) -> Iterator[Plot]:
    """Energy per item and MFU against batch size, where they were measured (an implausible
    MFU is left out); with `panels`, each panel from its own results."""
    found = measured(results, "efficiency")
    for workload, members in group_by(found, lambda r: r.spec.workload).items():
        shown = [
            (name, value) for name, value in PANELS if any(value(r) is not None for r in members)
        ]
        if not shown:
            continue
        fig, axes = new_figure(len(shown))
        left_out: list[Result] = []
        for ax, (name, value) in zip(axes, shown, strict=True):
            pool = members if panels is None else panels[name]
            have = [r for r in pool if r.spec.workload == workload and value(r) is not None]
            for series, group, color in colored(group_by(have, namer(have))):
                line = median_by_x(group, lambda r: r.spec.batch_size, left_out)
                points(
                    ax,
                    [r.spec.batch_size for r in line],
                    [value(r) or 0 for r in line],
                    line,
                    color,
                    series,
                )
            finish(ax, "micro batch", name, log_x=True)
        title = f"{workload}: " + " and ".join(name for name, _ in shown) + " against batch size"
        fig.suptitle(title, fontsize=10)
        note = FLAGGED_NOTE + left_out_note(list({id(r): r for r in left_out}.values()))
        yield Plot(slug("efficiency", workload), title, note, fig)


DRAWERS: dict[str, Callable[[Sequence[Result]], Iterator[Plot]]] = {
    "batch": throughput_vs_batch,
    "scaling": scaling,
    "first-epoch": first_vs_steady,
    "latency": latency_vs_throughput,
}
"""The figures every scenario may appear in but efficiency (drawn per panel), by the name
report.plotted chooses for them; the scenarios' own follow (Scenario.figures)."""
