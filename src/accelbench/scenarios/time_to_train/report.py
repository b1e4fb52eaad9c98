"""Time to train in words, a table and a figure: each run's outcome (Scenario.notes), and
throughput and time to target side by side over seeds (Scenario.table, .findings, .figures)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterator, Sequence

from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report import tables
from accelbench.report.cells import configuration, describe, label, rate_text
from accelbench.report.drawing import Plot, colored, finish, group_by, namer, new_figure, slug
from accelbench.scenarios.base import record_of
from accelbench.scenarios.time_to_train import TimeToTrain, seeds


def time_to_train_grid(results: Sequence[Result]) -> tables.Grid | None:
    """Throughput and time to target side by side, one row per cell over its seeds; None
    without time-to-train results."""
    summaries = seeds.by_seed(results)
    if not summaries:
        return None
    rows = []
    for s in summaries:
        first = s.runs[0]
        reached = [t for r in s.runs if (t := _ttt(r)).time_to_target_s is not None]
        rows.append(
            (
                label(first.spec),
                first.platform,
                str(first.spec.global_batch),
                configuration(first.spec, batch=False, devices=False),
                f"{first.spec.scaled_lr:.4g}",
                first.spec.knob("target") or "",
                "" if s.items_per_s is None else rate_text(s.items_per_s),
                "" if s.median_s is None else f"{s.median_s:.2f}",
                f"{s.time_to_target_s[0]:.2f}-{s.time_to_target_s[-1]:.2f}"
                if s.num_reached > 1
                else "",
                f"{s.num_reached}/{len(s.runs)}",
                _median_text([t.steps_to_target for t in reached], "{:.0f}"),
                _median_text([t.passes_to_target for t in reached], "{:.2f}"),
            )
        )
    headers = (
        "Workload",
        "Platform",
        "Global batch",
        "Precision, settings",
        "LR",
        "Target",
        "Throughput (items/s)",
        "Time to target (s)",
        "Range (s)",
        "Reached",
        "Steps",
        "Passes",
    )
    return tables.Grid(
        "Time to train (training clock; evaluation left out)",
        headers,
        rows,
        frozenset({0, 1, 3, 4, 5}),
    )


def _ttt(result: Result) -> TimeToTrain:
    found = record_of(result, TimeToTrain)
    assert found is not None
    return found


def _median_text(values: Sequence[float | None], form: str) -> str:
    known = [v for v in values if v is not None]
    return form.format(statistics.median(known)) if known else ""


def lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """The time-to-train scenario's lines under the results table (Scenario.notes)."""
    return [time_to_train_line(result, name)]


def time_to_train_line(result: Result, name: Callable[[RunSpec], str] = describe) -> str:
    """A time-to-train run: what ended it, at what cost, and any loss spike it recovered from."""
    t, m = _ttt(result), result.metrics
    assert m is not None
    if t.time_to_target_s is not None:
        text = (
            f"reached {t.target} in {t.time_to_target_s:.2f} s of training ({t.reason}): "
            f"{t.steps_to_target} steps, {t.items_to_target:,} {m.item_unit}, "
            f"{t.passes_to_target:.2f} passes over {t.num_train_items:,}"
        )
    else:
        text = f"{t.outcome}: {t.reason}"
    text += f"; +{t.eval_s:.2f} s evaluating {t.num_held_out_items:,} held out; lr {t.lr_rule}"
    first = m.loss[0]
    if math.isfinite(t.max_loss) and t.max_loss > result.spec.knob("diverge_factor") * first:
        text += (
            f"; loss peaked at {t.max_loss:.4g} at step {t.max_loss_step} "
            f"({t.max_loss / first:.3g}x the first step's)"
        )
    return f"{name(result.spec)}: {text}"


def time_to_train_headlines(
    results: Sequence[Result], name: Callable[[RunSpec], str] = describe
) -> list[str]:
    """Per workload and target: the seeds' spread of each cell, and whether the batch with the
    highest throughput is also the quickest to the target."""
    lines = []
    for s in seeds.by_seed(results):
        if len(s.runs) > 1:
            spread = (
                f", median {s.median_s:.2f} s, range {s.time_to_target_s[0]:.2f}-"
                f"{s.time_to_target_s[-1]:.2f} s"
                if s.num_reached > 1
                else ""
            )
            lines.append(
                f"{name(s.runs[0].spec)}: {len(s.runs)} seeds, {s.num_reached} reached "
                f"{s.runs[0].spec.knob('target')}{spread}"
            )
    for fastest, quickest in seeds.batch_choices(results):
        f = fastest.runs[0]
        unit = f.metrics.item_unit if f.metrics else "items"
        head = (
            f"{label(f.spec)} {f.spec.knob('target')}: the highest throughput, global batch "
            f"{f.spec.global_batch} ({rate_text(fastest.items_per_s or 0)} {unit}/s)"
        )
        if quickest is None:
            lines.append(f"{head}: no global batch reached the target in half its seeds or more")
        elif fastest is quickest:
            lines.append(f"{head}, is also the quickest to train ({quickest.median_s:.2f} s)")
        else:
            q = quickest.runs[0]
            lines.append(
                f"{head}, is not the quickest to train: global batch {q.spec.global_batch} reaches "
                f"it in {quickest.median_s:.2f} s at {rate_text(quickest.items_per_s or 0)} "
                f"{unit}/s"
                + (
                    f", against {fastest.median_s:.2f} s"
                    if fastest.median_s is not None
                    else f"; it reached the target in {fastest.num_reached} of "
                    f"{len(fastest.runs)} seeds"
                )
            )
    return lines


def figure(results: Sequence[Result]) -> Iterator[Plot]:
    """Median time to target against global batch over seeds, the bar spanning the fastest
    and slowest seed; cells where no seed reached the target are crosses on the x axis."""
    summaries = seeds.by_seed(results)
    for workload, group in group_by(summaries, lambda s: s.runs[0].spec.workload).items():
        fig, (ax,) = new_figure()
        series_of = namer([r for s in group for r in s.runs])
        by_series = group_by(group, lambda s: series_of(s.runs[0]))  # noqa: B023 (used at once)
        for series, members, color in colored(by_series):
            members.sort(key=lambda s: s.runs[0].spec.global_batch)
            reached = [s for s in members if s.median_s is not None]
            xs = [s.runs[0].spec.global_batch for s in reached]
            ys = [s.median_s or 0 for s in reached]
            low = [y - s.time_to_target_s[0] for y, s in zip(ys, reached, strict=True)]
            high = [s.time_to_target_s[-1] - y for y, s in zip(ys, reached, strict=True)]
            ax.errorbar(
                xs,
                ys,
                yerr=[low, high],
                fmt="o-",
                color=color,
                capsize=3,
                label=f"{series} (reached/seeds beside)",
            )
            for x, y, s in zip(xs, ys, reached, strict=True):
                ax.annotate(
                    f"{s.num_reached}/{len(s.runs)}",
                    (x, y),
                    xytext=(4, 4),
                    textcoords="offset points",
                    fontsize=7,
                )
            missed = [s.runs[0].spec.global_batch for s in members if s.median_s is None]
            if missed:  # at the top (x in data, y in axes units): never reached is no time at all
                ax.plot(
                    missed,
                    [1.0] * len(missed),
                    "x",
                    color=color,
                    ms=9,
                    mew=2,
                    clip_on=False,
                    transform=ax.get_xaxis_transform(),
                    label=f"{series}: target not reached (top)",
                )
        finish(ax, "global batch", "time to target (s, training clock)", log_x=True)
        title = f"{workload}: time to train against batch size"
        ax.set_title(title, fontsize=10)
        yield Plot(
            slug("time-to-train", workload),
            title,
            "Median over seeds; bars span the fastest and slowest seed.",
            fig,
        )
