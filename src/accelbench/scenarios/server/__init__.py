"""The server scenario, after MLPerf LoadGen's: queries of one item arrive at random at a rate
and a dynamic batcher answers them (measure.py); its headline is the rate sustained within
the latency bound, never the capacity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import Field

from accelbench.records.frozen import Frozen
from accelbench.records.stats import Summary
from accelbench.scenarios.base import Figure, Headline, Record, Scenario, Series, record_of
from accelbench.scenarios.settings import Arrivals

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


class ServerSettings(Arrivals):
    latency_bound_ms: float | None = Field(default=None, gt=0)
    """server: the p99 latency a rate must keep to count as sustained."""
    batch_timeout_ms: float = Field(default=2.0, ge=0)
    """server: the longest the oldest waiting query waits for its batch to fill."""


class ServerTrial(Frozen):
    """Queries sent at one target rate."""

    target_per_s: float
    achieved_per_s: float
    """Queries answered per second, from the first arrival to the last answer."""
    latency_ms: list[float]
    """Raw latency of every query, from its arrival to its batch's answer, in arrival order."""
    latency: Summary
    mean_batch: float
    """Queries per batch the dynamic batcher sent, on average."""


class ServerMetrics(Record):
    """The server scenario: the rates tried and the one reported."""

    kind: str = "server"
    latency_bound_ms: float | None
    trials: list[ServerTrial]
    reported: int | None
    """Index of the trial reported: the given rate's, or the highest rate whose p99 kept within
    the bound (None: no rate tried kept within it)."""
    search: str
    """How the rates were chosen, in words."""

    @property
    def sustained_per_s(self) -> float | None:
        """Queries answered per second at the reported rate; None where no rate was sustained."""
        return None if self.reported is None else self.trials[self.reported].achieved_per_s

    def series(self) -> Mapping[str, Series]:
        """The reported trial's latency, what the latency objective reads."""
        if self.reported is None:
            return {}
        latency = self.trials[self.reported].latency
        return {"latency": Series(latency.p99, "ms", summary=latency)}


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
    figures=(Figure("server-latency", "accelbench.scenarios.server.report:figure"),),
    verdict_rules="accelbench.scenarios.server.verdicts:server_flags",
    notes="accelbench.scenarios.server.report:lines",
    columns=_columns,
)
