"""The inference scenarios in words: a batch's latency percentiles (infer), the rate a server
sustained (server), generation's token latencies (generate), and a batch sweep's headlines.
Each scenario's plug-in names its lines here (Scenario.notes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from accelbench.analysis import objectives, validity
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.records.stats import Summary
from accelbench.report.cells import describe, label, rate_text
from accelbench.scenarios.base import record_of
from accelbench.scenarios.generate import GenerateMetrics
from accelbench.scenarios.server import ServerMetrics


def latency_lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """An inference result's latency percentiles, each with the batches behind it."""
    assert result.metrics is not None
    s = result.metrics.step_ms_steady
    return [
        f"{name(result.spec)}: latency per batch p50 {s.median:.2f} ms, p90 {s.p90:.2f} ms, "
        f"{p99_text(s)}, over {s.n} steady batches"
    ]


def server_lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """The back-to-back batches' latencies, then the rate reported and how it was chosen."""
    return [*latency_lines(result, name), server_line(result, name)]


def generate_lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
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


def p99_text(s: Summary) -> str:
    """A p99 latency, shown only with enough samples for one to lie beyond it, and called an
    estimate below the count with which a p99 can be claimed (validity.MIN_P99_SAMPLES)."""
    if s.n >= validity.MIN_P99_SAMPLES:
        return f"p99 {s.p99:.2f} ms"
    if s.n >= validity.MIN_P99_ESTIMATE:
        return f"p99 estimate {s.p99:.2f} ms (a claim needs {validity.MIN_P99_SAMPLES})"
    return f"p99 not shown (needs {validity.MIN_P99_ESTIMATE})"


def headlines(
    results: Sequence[Result],
    latency_bound_ms: float | None,
    name: Callable[[RunSpec], str] = describe,
) -> list[str]:
    """From a batch-size sweep of inference runs: the throughput at the lowest latency, and the
    highest throughput whose p99 latency is known to be within the bound (advice's rule)."""
    lines = []
    for choice in objectives.latency_choices(results, latency_bound_ms):
        low, m = choice.lowest, choice.lowest.metrics
        assert m is not None
        lines.append(
            f"{name(low.spec)}: lowest latency (p50 {m.step_ms_steady.median:.2f} ms) at "
            f"batch {low.spec.batch_size}, {rate_text(low.items_per_s or 0)} {m.item_unit}/s"
        )
        if latency_bound_ms is None:
            continue
        best = choice.best_within
        if best is None or best.metrics is None:
            lines.append(
                f"{label(low.spec)}: no batch size has a p99 latency known to be within "
                f"{latency_bound_ms:g} ms"
            )
            continue
        lines.append(
            f"{name(best.spec)}: highest throughput with p99 within {latency_bound_ms:g} ms: "
            f"{rate_text(best.items_per_s or 0)} {best.metrics.item_unit}/s "
            f"(p99 {best.metrics.step_ms_steady.p99:.2f} ms)"
        )
    return lines
