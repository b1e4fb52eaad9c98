"""Knobs that more than one scenario has: each scenario's Settings inherits the groups it
needs, so a knob is declared once, with one default (the key of a stored cell depends on it)."""

from __future__ import annotations

from pydantic import Field

from accelbench.scenarios.base import Settings


class Prompts(Settings):
    """The lengths of each request: generate's prompts of a batch, serve's requests."""

    prompt_tokens: int = Field(default=128, gt=0, le=2**20)
    """generate and serve: tokens in each prompt."""
    new_tokens: int = Field(default=32, gt=1, le=2**20)
    """generate and serve: tokens made for each prompt (generate: greedy, end-of-sequence
    ignored)."""


class Arrivals(Settings):
    """Queries arriving at a rate: server's and serve's."""

    rate_per_s: float | None = Field(default=None, gt=0)
    """server and serve: the queries' mean arrival rate (Poisson); None: search for the highest
    rate whose p99 latency stays within latency_bound_ms (serve: that meets the SLO)."""
    num_queries: int = Field(default=500, gt=0)
    """server and serve: queries (requests) sent at each rate tried."""
