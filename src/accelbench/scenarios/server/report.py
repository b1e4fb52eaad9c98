"""The server scenario in words (Scenario.notes): its batches' latencies, then the rate
reported and how it was chosen."""

from __future__ import annotations

from collections.abc import Callable

from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.cells import describe
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
