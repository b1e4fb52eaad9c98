"""The generate scenario in words and a figure: its token latencies, each with the calls or gaps
behind it (Scenario.notes), and tokens/s per user against per device (Scenario.figures)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from accelbench.records.result import Result, measured
from accelbench.records.spec import RunSpec
from accelbench.report.cells import describe, rate_text
from accelbench.report.drawing import (
    Plot,
    finish,
    group_by,
    left_out_note,
    median_by_x,
    namer,
    new_figure,
    palette,
    points,
    slug,
)
from accelbench.report.figures import FLAGGED_NOTE
from accelbench.report.inference import p99_text
from accelbench.scenarios.base import record_of
from accelbench.scenarios.generate import GenerateMetrics


def lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """A generate result's token latencies, each with the calls or gaps behind it."""
    g, m = record_of(result, GenerateMetrics), result.metrics
    assert g is not None and m is not None
    return [
        f"{name(result.spec)}: TTFT p50 {g.ttft_ms.median:.2f} ms, {p99_text(g.ttft_ms)}, "
        f"over {g.ttft_ms.n} calls; TPOT p50 {g.tpot_ms.median:.2f} ms; ITL p50 "
        f"{g.itl_ms.median:.2f} ms, {p99_text(g.itl_ms)}, over {g.itl_ms.n} gaps; "
        f"{rate_text(m.tokens_per_s or 0)} output tokens/s; prefill "
        f"{rate_text(g.prefill_tokens_per_s)} tokens/s ({g.prompt_tokens} prompt, "
        f"{g.new_tokens} new tokens per sequence)"
        + (
            f"; {m.joules_per_item / g.new_tokens:.3g} J per output token ({m.energy.method})"
            if m.joules_per_item is not None and m.energy is not None
            else ""
        )
    ]


def figure(results: Sequence[Result]) -> Iterator[Plot]:
    """Generation's trade-off, a point per batch size: tokens/s each user sees (1 / TPOT)
    against output tokens/s per device; and the time to first token against batch size."""
    made = [r for r in measured(results) if record_of(r, GenerateMetrics)]
    for workload, own in group_by(made, lambda r: r.spec.workload).items():
        fig, (trade, first) = new_figure(ncols=2)
        colors, left_out = palette(), list[Result]()
        for series, group in sorted(group_by(own, namer(own)).items()):
            color = next(colors)
            line = median_by_x(group, lambda r: r.spec.batch_size, left_out)
            gens = [g for r in line if (g := record_of(r, GenerateMetrics))]
            per_device = [(r.metrics.tokens_per_s or 0) / r.num_devices for r in line if r.metrics]
            per_user = [1e3 / g.tpot_ms.median for g in gens]
            points(trade, per_device, per_user, line, color, series)
            for x, y, r in zip(per_device, per_user, line, strict=True):
                trade.annotate(f"bs={r.spec.batch_size}", (x, y), fontsize=7)
            batches = [r.spec.batch_size for r in line]
            points(first, batches, [g.ttft_ms.median for g in gens], line, color, series)
        finish(trade, "output tokens/s per device", "tokens/s per user (1 / TPOT p50)")
        finish(first, "batch size (sequences)", "time to first token p50 (ms)", log_x=True)
        title = f"{workload}: generation, per user against per device"
        trade.set_title(title, fontsize=10)
        note = FLAGGED_NOTE + left_out_note(left_out)
        yield Plot(slug("generation", workload), title, note, fig)
