"""The server scenario, after MLPerf LoadGen's: queries of one item arrive at random at a rate.

First the infer scenario's back-to-back batches of spec.batch_size (compilation and warm-up,
then the capacity: the most items per second the model answers). Then queries arrive as a
Poisson process; a dynamic batcher sends those that have arrived, up to spec.batch_size, once
the batch is full or its oldest query has waited batch_timeout_ms; each query's latency runs
from its arrival to its batch's answer. With rate_per_s that rate is sent; with only a latency
bound, a bisection between zero and the capacity finds the highest rate that is answered as fast
as it comes with a p99 within it, in SEARCH_TRIALS trials, all kept in the record.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
from collections.abc import Callable

import torch

from accelbench.analysis.validity import MIN_P99_ESTIMATE, OVERLOAD_FRAC
from accelbench.execution import device as dev
from accelbench.records.result import Metrics
from accelbench.records.spec import RunSpec
from accelbench.records.stats import summarize
from accelbench.scenarios.infer import measure as infer
from accelbench.scenarios.server import (
    SEARCH_TRIALS,
    ServerMetrics,
    ServerSettings,
    ServerTrial,
)
from accelbench.workload import Batch, Workload


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    own = ServerSettings.of(spec)
    metrics, forward, queries = infer.measure_with(spec, workload, device)
    full = queries[0]  # spec.batch_size items; a batch of n sends its first n
    rng = random.Random(spec.seed)

    def trial(rate: float) -> ServerTrial:
        return serve(forward, device, full, rate, spec, rng)

    if own.rate_per_s is not None:
        trials = [trial(own.rate_per_s)]
        reported: int | None = 0
        search = f"the given rate, {own.num_queries} queries"
    else:
        assert own.latency_bound_ms is not None
        trials, reported = [], None
        low, high = 0.0, metrics.items_per_s
        for _ in range(SEARCH_TRIALS):
            trials.append(trial((low + high) / 2))
            if kept_within(trials[-1], own.latency_bound_ms):
                low, reported = trials[-1].target_per_s, len(trials) - 1
            else:
                high = trials[-1].target_per_s
        search = (
            f"bisection of (0, {metrics.items_per_s:.4g}/s], the back-to-back capacity, in "
            f"{SEARCH_TRIALS} trials of {own.num_queries} queries"
        )
    server = ServerMetrics(
        latency_bound_ms=own.latency_bound_ms, trials=trials, reported=reported, search=search
    )
    return metrics.model_copy(update={"record": server})


def kept_within(trial: ServerTrial, bound_ms: float) -> bool:
    """Whether the trial sustained its rate (answered nearly as fast as queries came) with a p99
    known, from enough queries, to be within the bound."""
    return (
        trial.latency.n >= MIN_P99_ESTIMATE
        and trial.latency.p99 <= bound_ms
        and trial.achieved_per_s >= OVERLOAD_FRAC * trial.target_per_s
    )


def serve(
    forward: Callable[[Batch], object],
    device: torch.device,
    full: Batch,
    rate: float,
    spec: RunSpec,
    rng: random.Random,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> ServerTrial:
    """Send spec.num_queries Poisson arrivals at `rate` through the dynamic batcher.

    The batcher is event-driven: it sleeps once until the next event, an arrival or the oldest
    query's deadline, whichever comes first, and never polls; latencies run from each query's
    scheduled arrival, so a late wake-up counts against the server, as LoadGen counts it.
    `clock` and `sleep` are the real ones except in tests of the policy."""
    own = ServerSettings.of(spec)
    n, max_batch, timeout_s = own.num_queries, spec.batch_size, own.batch_timeout_ms / 1e3
    arrivals = list(itertools.accumulate(rng.expovariate(rate) for _ in range(n)))
    latency_ms: list[float] = []
    sizes: list[int] = []
    done, end = 0, 0.0
    start = clock()
    while done < n:
        now = clock() - start
        arrived = bisect.bisect_right(arrivals, now)
        if arrived == done:  # nothing waiting: sleep until the next query arrives
            sleep(arrivals[done] - now)
            continue
        waiting = arrived - done
        deadline = arrivals[done] + timeout_s
        if waiting < max_batch and arrived < n and now < deadline:
            sleep(min(deadline, arrivals[arrived]) - now)  # wait for more, not too long
            continue
        size = min(waiting, max_batch)
        forward({k: v[:size] for k, v in full.items()})
        dev.synchronize(device)
        end = clock() - start
        latency_ms += [(end - a) * 1e3 for a in arrivals[done : done + size]]
        sizes.append(size)
        done += size
    return ServerTrial(
        target_per_s=rate,
        achieved_per_s=n / (end - arrivals[0]) if end > arrivals[0] else rate,
        latency_ms=latency_ms,
        latency=summarize(latency_ms),
        mean_batch=n / len(sizes),
    )
