"""The server scenario's own verdict rules (Scenario.verdict_rules): a rate was sustained,
answered as fast as it came, with enough queries for its p99."""

from __future__ import annotations

from accelbench.analysis.validity import OVERLOAD_FRAC, Flag, percentile_short
from accelbench.records.result import Result
from accelbench.scenarios.base import record_of
from accelbench.scenarios.server import ServerMetrics


def server_flags(result: Result) -> list[tuple[Flag, str]]:
    """The server scenario's rules: a rate was sustained, answered as fast as it came."""
    server = record_of(result, ServerMetrics)
    return [] if server is None else _server_flags(server)


def _server_flags(server: ServerMetrics) -> list[tuple[Flag, str]]:
    if server.reported is None:
        return [(Flag.TOO_SLOW, f"no rate tried kept p99 within {server.latency_bound_ms:g} ms")]
    trial = server.trials[server.reported]
    flags = []
    bound = server.latency_bound_ms
    overs = 0 if bound is None else sum(v > bound for v in trial.latency_ms)
    if why := percentile_short(trial.latency.n, overs, "queries", "raise --num-queries"):
        flags.append((Flag.TOO_SHORT, why))
    if trial.achieved_per_s < OVERLOAD_FRAC * trial.target_per_s:
        flags.append(
            (
                Flag.OVERLOADED,
                f"answered {trial.achieved_per_s:.4g} of {trial.target_per_s:.4g} queries/s",
            )
        )
    return flags
