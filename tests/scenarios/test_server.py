from __future__ import annotations

import random
import statistics

import numpy as np
import pytest
import torch

from accelbench.analysis import validity
from accelbench.cell.runner import run
from accelbench.report import figures
from accelbench.scenarios.server import ServerMetrics
from accelbench.scenarios.server import measure as server
from accelbench.scenarios.server import report as server_text

from ..conftest import tiny


def server_run(**overrides: object):
    fields = {"scenario": "server", "batch_size": 8, "steps_per_epoch": 20, "window_steps": 5}
    return run(tiny(**(fields | overrides)))


def p99(latencies: list[float]) -> float:
    return statistics.quantiles(latencies, n=100, method="inclusive")[98]


def test_a_given_rate_is_sent_as_poisson_arrivals_and_batched() -> None:
    result = server_run(rate_per_s=400.0, num_queries=200, batch_timeout_ms=5.0)
    assert result.status == "ok" and result.metrics and result.metrics.of(ServerMetrics)
    (trial,) = result.metrics.of(ServerMetrics).trials
    assert len(trial.latency_ms) == 200 and all(ms > 0 for ms in trial.latency_ms)
    assert trial.target_per_s == 400.0 and 1 <= trial.mean_batch <= 8
    # (How long batches wait, and that arrivals keep their rate, is timed on a virtual clock
    # below: a shared machine's clock would make those checks flaky.)
    assert "server rate: 400 queries/s sent" in server_text.server_line(result)


def test_the_rate_search_keeps_p99_within_the_bound_on_the_raw_latencies() -> None:
    bound_ms = 200.0  # far above a tiny model's latency, so that a loaded host still meets it
    result = server_run(latency_bound_ms=bound_ms, num_queries=150)
    assert result.metrics and result.metrics.of(ServerMetrics)
    found = result.metrics.of(ServerMetrics)
    assert len(found.trials) == server.SEARCH_TRIALS
    (plot,) = [p for p in figures.plots([result]) if p.name.startswith("server-latency")]
    trials, bound = plot.figure.axes[0].get_lines()
    assert np.asarray(trials.get_xdata()).tolist() == [t.achieved_per_s for t in found.trials]
    assert np.asarray(trials.get_ydata()).tolist() == [t.latency.p99 for t in found.trials]
    assert np.asarray(bound.get_ydata()).tolist() == [bound_ms, bound_ms]
    if found.reported is None:  # a host too loaded for even that: every trial must show it
        assert not any(server.kept_within(t, bound_ms) for t in found.trials)
        return
    best = found.trials[found.reported]
    assert p99(best.latency_ms) == pytest.approx(best.latency.p99)
    assert p99(best.latency_ms) <= bound_ms
    assert best.achieved_per_s >= validity.OVERLOAD_FRAC * best.target_per_s
    # Every faster rate tried broke the bound or did not keep up.
    for faster in (t for t in found.trials if t.target_per_s > best.target_per_s):
        assert not server.kept_within(faster, bound_ms)
    assert "highest rate with p99 within 200 ms" in server_text.server_line(result)


def test_a_bound_no_rate_keeps_is_flagged() -> None:
    result = server_run(latency_bound_ms=1e-6, num_queries=100)
    assert (
        result.metrics
        and result.metrics.of(ServerMetrics)
        and result.metrics.of(ServerMetrics).reported is None
    )
    assert ("too-slow", "no rate tried kept p99 within 1e-06 ms") in validity.verdict(result)


def test_the_server_scenario_needs_a_rate_or_a_bound() -> None:
    with pytest.raises(ValueError, match="needs --rate-per-s, or --latency-bound-ms"):
        tiny(scenario="server")


def test_the_batcher_wakes_only_for_arrivals_and_deadlines() -> None:
    """The policy on a virtual clock: a batch takes 1 ms, the oldest query waits 2 ms at most."""
    now = [0.0]
    sleeps: list[float] = []
    sizes: list[int] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    def forward(batch: dict[str, torch.Tensor]) -> None:
        sizes.append(len(batch["x"]))
        now[0] += 0.001

    spec = tiny(
        scenario="server", batch_size=4, rate_per_s=300.0, batch_timeout_ms=2.0, num_queries=300
    )
    trial = server.serve(
        forward,
        torch.device("cpu"),
        {"x": torch.zeros(4, 3)},
        300.0,
        spec,
        random.Random(0),
        clock=lambda: now[0],
        sleep=sleep,
    )
    assert sum(sizes) == 300 and max(sizes) <= 4 and 1 < trial.mean_batch < 4
    # Each sleep ends at an event (an arrival or the oldest query's deadline): no polling.
    assert len(sleeps) <= 2 * 300 and all(s > 0 for s in sleeps)
    # Latency: its batch's 1 ms, after at most the 2 ms wait and one batch ahead of it.
    assert min(trial.latency_ms) >= 1.0 - 1e-9 and max(trial.latency_ms) <= 4.0 + 1e-9
