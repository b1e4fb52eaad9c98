"""The server scenario in words and a figure: its batches' latencies, then the rate reported and
how it was chosen (Scenario.notes); each rate's p99 against the rate answered, with the bound
(Scenario.figures)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from accelbench.records.result import Result, measured
from accelbench.records.spec import RunSpec
from accelbench.report.cells import describe
from accelbench.report.drawing import Plot, finish, group_by, namer, new_figure, palette, slug
from accelbench.report.inference import p99_text
from accelbench.scenarios.base import record_of
from accelbench.scenarios.infer.report import latency_lines
from accelbench.scenarios.server import ServerMetrics


def lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """The back-to-back batches' latencies, then the rate reported and how it was chosen."""
    return [*latency_lines(result, name), server_line(result, name)]


def server_line(result: Result, name: Callable[[RunSpec], str] = describe) -> str:
    """The server scenario's reported rate and its latencies, and how the rate was chosen."""
    server = record_of(result, ServerMetrics)
    assert server is not None
    if server.reported is None:
        return (
            f"{name(result.spec)}: no rate kept p99 within {server.latency_bound_ms:g} ms "
            f"({server.search})"
        )
    t = server.trials[server.reported]
    what = (
        f"highest rate with p99 within {server.latency_bound_ms:g} ms"
        if result.spec.knob("rate_per_s") is None
        else "rate"
    )
    return (
        f"{name(result.spec)}: server {what}: {t.target_per_s:.4g} queries/s sent, "
        f"{t.achieved_per_s:.4g} answered; latency p50 {t.latency.median:.2f} ms, "
        f"{p99_text(t.latency)} over {t.latency.n} queries, mean batch {t.mean_batch:.1f} "
        f"({server.search})"
    )


def figure(results: Sequence[Result]) -> Iterator[Plot]:
    """Per workload: each server run's trials, p99 latency against the rate answered, a point
    per rate tried, and the latency bound as a line of the run's colour."""
    served = [r for r in measured(results) if record_of(r, ServerMetrics)]
    for workload, own in group_by(served, lambda r: r.spec.workload).items():
        fig, (ax,) = new_figure()
        colors, series_of = palette(), namer(own)
        for r in own:
            found = record_of(r, ServerMetrics)
            assert found is not None
            color, trials = next(colors), found.trials
            ax.plot(
                [t.achieved_per_s for t in trials],
                [t.latency.p99 for t in trials],
                "s--",
                color=color,
                label=f"{series_of(r)} p99",
            )
            if found.latency_bound_ms is not None:
                ax.axhline(found.latency_bound_ms, color=color, lw=0.8, alpha=0.6)
        finish(ax, "queries answered per second", "query latency p99 (ms)")
        title = f"{workload}: server latency against the rate answered"
        ax.set_title(title, fontsize=10)
        note = "A point per rate tried; the flat line is the run's latency bound."
        yield Plot(slug("server-latency", workload), title, note, fig)
