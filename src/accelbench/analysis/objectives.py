"""What each objective of `accelbench recommend` reads and which way is better, the constraints
a user can put on the answer, the price table of the cost objective, and the latency bound's
rule (a p99 counts only with enough batches behind it), which the report's inference headlines
share."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from accelbench import inputs
from accelbench import scenarios as registry
from accelbench.analysis import validity
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result
from accelbench.records.stats import Summary
from accelbench.scenarios.base import series

Objective = Literal["throughput", "time-to-train", "latency", "energy", "cost", "goodput"]


OBJECTIVES: tuple[str, ...] = get_args(Objective)


@dataclass(frozen=True)
class Constraints:
    global_batch: int | None = None
    """Only configurations with this many items per optimizer step (fixed for convergence)."""
    max_devices: int | None = None
    memory_headroom_pct: float | None = None
    """Keep this share of device memory free: configurations whose peak is above the rest are out."""
    latency_bound_ms: float | None = None
    prices: dict[str, float] = field(default_factory=dict)
    """$ per device-hour by a part of the platform name (for the cost objective)."""
    tokens: float | None = None
    """time-to-train: project the days to train this many tokens from training throughput
    (language models), instead of reading time-to-train runs."""


@dataclass(frozen=True)
class Goal:
    name: str
    """Its name among the objectives the scenarios' plug-ins answer (Scenario.objectives)."""
    unit: str
    lower_is_better: bool

    @property
    def scenarios(self) -> tuple[str, ...]:
        """The scenarios whose results answer it."""
        return registry.with_objective(self.name)


GOALS: dict[str, Goal] = {
    "throughput": Goal("throughput", "items/s", False),
    "time-to-train": Goal("time-to-train", "s to target (median over seeds)", True),
    "latency": Goal("latency", "items/s within the latency bound", False),
    "energy": Goal("energy", "J per item", True),
    "cost": Goal("cost", "$ per million items", True),
    "goodput": Goal("goodput", "requests/s within the SLO", False),
}
PROJECTED = Goal("projection", "days to train the tokens, projected from throughput", True)
"""time-to-train with a token count: answered from training throughput, not measured to a
target (Constraints.tokens)."""


def goal_of(objective: str, constraints: Constraints) -> Goal:
    """The goal an objective sets under these constraints."""
    if objective == "time-to-train" and constraints.tokens is not None:
        return PROJECTED
    return GOALS[objective]


def load_prices(path: Path) -> dict[str, float]:
    """A user's price table: `[prices]` then `"platform name part" = dollars per device-hour`."""
    try:
        table = tomllib.loads(inputs.read_text(path, "prices file")).get("prices")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AccelbenchError(f"cannot read prices file {path}: {exc}") from None
    if not isinstance(table, dict) or not table:
        raise AccelbenchError(
            f'{path} has no [prices] table: write e.g. [prices] then "A100" = 2.5 ($ per device-hour)'
        )
    for name, price in table.items():
        if isinstance(price, bool) or not isinstance(price, int | float) or not price > 0:
            raise AccelbenchError(f"{path}: the price of {name!r} must be a positive number")
    return {name: float(price) for name, price in table.items()}


def price_of(platform: str, prices: dict[str, float]) -> float | None:
    """The price whose name is the longest part of the platform's name (case aside)."""
    found = [(len(k), v) for k, v in prices.items() if k.lower() in platform.lower()]
    return max(found)[1] if found else None


def latency(r: Result) -> Summary | None:
    """The latency an inference result promises: a batch's, or for the server scenario a
    query's at the rate it sustained (queueing included); None where it has none."""
    m = r.metrics
    if m is None or r.spec.scenario not in registry.with_objective("latency"):
        return None
    if registry.get(r.spec.scenario).batch_latency:
        return m.step_ms_steady
    found = series(r, "latency")
    return found.summary if found else None


def within_latency(r: Result, bound_ms: float) -> bool:
    """Whether an inference or server result's p99 latency is known to be within the bound:
    only p99s with enough batches (or queries) behind them count."""
    s = latency(r)
    return s is not None and p99_within(s.p99, s.n, bound_ms)


def p99_within(p99_ms: float, n: int, bound_ms: float) -> bool:
    """within_latency() of a p99 from n samples (a stored listing's, where no record is read)."""
    return n >= validity.MIN_P99_SAMPLES and p99_ms <= bound_ms
