"""The server scenario, after MLPerf LoadGen's: queries of one item arrive at random at a rate
and a dynamic batcher answers them (measure.py); its headline is the rate sustained within
the latency bound, never the capacity."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from accelbench.records.frozen import Frozen
from accelbench.records.stats import Summary
from accelbench.scenarios.base import Record, Series
from accelbench.scenarios.settings import Arrivals

SEARCH_TRIALS = 6
"""Rates tried by a bisection for the highest rate that meets a bound: it narrows the rate to
1/64 of where it starts (the server scenario's, and serve's without a rate)."""


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
