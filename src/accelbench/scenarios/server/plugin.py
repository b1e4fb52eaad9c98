"""The server plug-in: what the core reads of the server scenario (its rules, headline and
columns; its report and verdicts in modules of this folder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from accelbench.scenarios.base import Figure, Headline, Scenario, record_of
from accelbench.scenarios.server import ServerMetrics, ServerSettings, report, verdicts

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


def _rules(spec: RunSpec) -> None:
    own = ServerSettings.of(spec)
    if own.rate_per_s is None and own.latency_bound_ms is None:
        raise ValueError(
            "the server scenario needs --rate-per-s, or --latency-bound-ms to search for one"
        )


def _headline(result: Result) -> Headline | None:
    """The queries answered per second at the reported rate (one trial: no interval)."""
    server = record_of(result, ServerMetrics)
    rate = server.sustained_per_s if server else None
    return None if rate is None else Headline(rate, "queries/s sustained")


def _columns(result: Result) -> Mapping[str, object]:
    server = record_of(result, ServerMetrics)
    if not server or server.reported is None:
        return {}
    t = server.trials[server.reported]
    return {
        "server_rate_per_s": t.target_per_s,
        "server_latency_p50_ms": t.latency.median,
        "server_latency_p99_ms": t.latency.p99,
        "server_mean_batch": t.mean_batch,
    }


SCENARIO = Scenario(
    name="server",
    summary="queries arriving at random at a rate, batched dynamically up to batch_size",
    measure="accelbench.scenarios.server.measure:measure",
    batch_latency=False,
    settings=ServerSettings,
    rules=_rules,
    record=ServerMetrics,
    headline=_headline,
    objectives=("latency",),
    figures=(Figure("server-latency", report.figure),),
    verdict_rules=verdicts.server_flags,
    notes=report.lines,
    columns=_columns,
)
