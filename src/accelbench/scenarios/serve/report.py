"""The serve scenario in words and figures: each trial's goodput and latencies, and the curves
of latency and per-user speed against load, a line per platform."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from accelbench.analysis.validity import MIN_P99_ESTIMATE, MIN_P99_SAMPLES
from accelbench.records.result import Result, measured
from accelbench.records.spec import RunSpec
from accelbench.records.stats import Summary
from accelbench.report.cells import describe, rate_text
from accelbench.report.drawing import (
    Plot,
    finish,
    group_by,
    namer,
    new_figure,
    palette,
    slug,
    verdict,
)
from accelbench.scenarios.base import record_of
from accelbench.scenarios.serve.record import ServeMetrics, ServeTrial
from accelbench.scenarios.serve.settings import ServeSettings


def cell_text(result: Result) -> str:
    """The serve result's headline, for the line printed as its cell ends."""
    serve = record_of(result, ServeMetrics)
    assert serve is not None
    loop = serve.trials[0]
    closed = (
        f"closed loop of {loop.concurrency}: {rate_text(loop.requests_per_s)} requests/s, "
        f"{rate_text(loop.output_tokens_per_s)} output tokens/s"
    )
    if serve.reported is None:
        return f"no rate met the SLO ({slo_text(result.spec)}); {closed}"
    t, ci = serve.trials[serve.reported], result.items_per_s_ci
    interval = f" [{rate_text(ci[0])}-{rate_text(ci[1])} over its requests]" if ci else ""
    return (
        f"goodput {rate_text(t.goodput_per_s)} requests/s{interval} at {_sent_text(t)} "
        f"({100 * t.within_slo:.0f}% within {slo_text(result.spec)}); {closed}"
    )


def _sent_text(t: ServeTrial) -> str:
    """The rate asked for, and the one the arrivals realised where known."""
    realised = f", {rate_text(t.sent_per_s)}/s realised" if t.sent_per_s else ""
    return f"{rate_text(t.rate_per_s or 0)}/s sent{realised}"


def slo_text(spec: RunSpec) -> str:
    own = ServeSettings.of(spec)
    return f"TTFT <= {own.slo_ttft_ms:g} ms, TPOT <= {own.slo_tpot_ms:g} ms"


def lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """A line per trial: the closed loop, then each rate, the reported one marked."""
    serve, cell = record_of(result, ServeMetrics), name(result.spec)
    assert serve is not None
    out = []
    for index, t in enumerate(serve.trials):
        if t.rate_per_s is None:
            how = f"closed loop of {t.concurrency} in flight"
        else:
            reported = " (reported)" if index == serve.reported else ""
            how = f"{_sent_text(t)}{reported}"
        out.append(f"{cell}: {how}: {trial_text(t)}")
    model = f"; the server names its model {serve.server_model}" if serve.server_model else ""
    unmetered = next((t.energy for t in serve.trials if t.energy and t.energy.joules is None), None)
    model += f"; energy not measured: {unmetered.scope}" if unmetered else ""
    out.append(
        f"{cell}: SLO {slo_text(result.spec)} for {100 * serve.slo_share:g}% ({serve.search}){model}"
    )
    return out


def trial_text(t: ServeTrial) -> str:
    errors = sum(r.error is not None for r in t.requests)
    first_error = next((r.error for r in t.requests if r.error), None)
    parts = [
        f"{rate_text(t.requests_per_s)} requests/s, {rate_text(t.output_tokens_per_s)} output "
        f"tokens/s, goodput {rate_text(t.goodput_per_s)}/s ({100 * t.within_slo:.0f}% within)",
        *(f"{name} {_percentiles(s)}" for name, s in _latencies(t) if s is not None),
        f"{len(t.requests)} requests"
        + (f", {errors} failed (first: {first_error})" if errors else ""),
    ]
    if t.energy is not None and t.joules_per_output_token is not None:
        parts.append(
            f"{t.joules_per_output_token:.3g} J per output token, {t.joules_per_request or 0:.3g} "
            f"J per request ({t.energy.method}: {t.energy.scope})"
        )
    return "; ".join(parts)


def _latencies(t: ServeTrial) -> list[tuple[str, Summary | None]]:
    return [("TTFT", t.ttft_ms), ("TPOT", t.tpot_ms), ("ITL", t.itl_ms), ("E2EL", t.e2el_ms)]


def _percentiles(s: Summary) -> str:
    """p50, and p99 where enough samples lie behind it (an estimate below the count a claim
    needs), each with the count."""
    estimate = " estimate" if s.n < MIN_P99_SAMPLES else ""
    p99 = f", p99{estimate} {s.p99:.1f}" if s.n >= MIN_P99_ESTIMATE else ""
    return f"p50 {s.median:.1f}{p99} ms (n={s.n})"


def curves(results: Sequence[Result]) -> Iterator[Plot]:
    """Per served model: p50 and p99 TTFT and TPOT against the request rate answered, a point
    per trial in the order of the rates sent (the closed loop last), so a line follows the load
    up; and tokens/s per user (1 / TPOT p50) against the server's output tokens/s. Trials of a
    flagged result are hollow."""
    served = [r for r in measured(results) if record_of(r, ServeMetrics)]
    for workload, own in group_by(served, lambda r: r.spec.workload).items():
        fig, (ttft, tpot, trade) = new_figure(ncols=3)
        colors = palette()
        for series, group in sorted(group_by(own, namer(own)).items()):
            color = next(colors)
            marked = sorted(
                (
                    (t, verdict(r) == "valid")
                    for r in group
                    if (serve := record_of(r, ServeMetrics))
                    for t in serve.trials
                ),
                key=lambda tv: (tv[0].rate_per_s or float("inf"), tv[0].requests_per_s),
            )
            trials = [t for t, _ in marked]
            for ax, name in ((ttft, "ttft_ms"), (tpot, "tpot_ms")):
                drawn = [(t.requests_per_s, s, v) for t, v in marked if (s := getattr(t, name))]
                xs = [x for x, _, _ in drawn]
                for stat, shape, label in (("median", "o-", "p50"), ("p99", "s--", "p99")):
                    ys = [getattr(s, stat) for _, s, _ in drawn]
                    ax.plot(xs, ys, shape[1:], color=color, label=f"{series} {label}")
                    for x, y, (_, _, valid) in zip(xs, ys, drawn, strict=True):
                        face = color if valid else "white"
                        ax.plot([x], [y], shape[0], color=color, markerfacecolor=face)
            timed = [t for t in trials if t.tpot_ms]
            trade.plot(
                [t.output_tokens_per_s for t in timed],
                [1e3 / t.tpot_ms.median for t in timed if t.tpot_ms],
                "o-",
                color=color,
                label=series,
            )
        finish(ttft, "requests/s answered", "time to first token (ms)")
        finish(tpot, "requests/s answered", "time per output token (ms)")
        finish(trade, "output tokens/s of the server", "tokens/s per user (1 / TPOT p50)")
        title = f"{workload}: latency and per-user speed against load"
        ttft.set_title(title, fontsize=10)
        caption = (
            "a point per trial (the closed loop and each rate), hollow where the result is "
            f"flagged; p99 from trials of fewer than {MIN_P99_ESTIMATE} requests is close to "
            "their slowest"
        )
        yield Plot(slug("serving", workload), title, caption, fig)
