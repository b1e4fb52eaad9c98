"""The serve scenario: streamed requests to a running OpenAI-compatible server, timed on the
client (endpoint.py speaks the protocol).

First a closed loop: spec.batch_size clients, each sending its next request as its last one
ends, for spec.epochs epochs of spec.steps_per_epoch steps of batch_size requests each; epoch 1
holds the server's warm-up (its compilation, graph capture, cache allocation) apart, as
everywhere, and the steady epochs give the delivered rate in requests/s with its interval: the
server's capacity at that concurrency. Then requests arrive as a Poisson process (gamma with
spec.burstiness), never held back: at spec.rate_per_s (or ramping from it to
spec.ramp_to_per_s), or, with only the SLO, at rates a bisection of (0, capacity] picks in
SEARCH_TRIALS trials for the highest one that meets it, as the server scenario searches; or they
replay spec.trace, each request at its time with its lengths.

Per request: TTFT (sent to first chunk), TPOT ((E2EL - TTFT) / (output tokens - 1)), ITL (gaps
between chunks), E2EL. A request is within the SLO when it succeeded with TTFT and TPOT within
their targets; goodput is such requests per second; a rate meets the SLO when SLO_SHARE of its
requests are within it and it was answered about as fast as it came (validity.OVERLOAD_FRAC).
The host's other work is read over the arrival trials, where the headline is measured; a server
on this host is the measurement's own work (server_pids).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path

from accelbench.engines import HOST
from accelbench.errors import AccelbenchError
from accelbench.execution import interruption, progress
from accelbench.execution.meters import power_series
from accelbench.execution.meters.energy import CounterMeter, WindowMeter, server_meter
from accelbench.execution.meters.host import HostMonitor, server_pids
from accelbench.records.result import Metrics
from accelbench.records.spec import RunSpec
from accelbench.records.stats import summarize
from accelbench.scenarios.epochs import Raw, build_metrics, frozen_heap, measured_epochs
from accelbench.scenarios.serve import endpoint
from accelbench.scenarios.serve.record import ServedRequest, ServeMetrics, ServeTrial
from accelbench.scenarios.serve.settings import ServeSettings
from accelbench.scenarios.serve.verdicts import keeps_up
from accelbench.scenarios.server import SEARCH_TRIALS

SLO_SHARE = 0.99
"""MLPerf Inference's server latency bounds hold at the 99th percentile."""

Send = Callable[[float, tuple[int, int] | None], Coroutine[None, None, ServedRequest]]
"""Sends the next request (of the given prompt and new tokens, else lengths drawn as the spec
says) and times it from a trial's start (time.perf_counter)."""


@dataclass(frozen=True)
class Requests:
    """What a step of the closed loop counts: requests ended (their tokens vary)."""

    item_unit: str = "requests"
    tokens_per_item: int | None = None


def measure(spec: RunSpec) -> Metrics:
    """A client scenario's measurement: the spec alone, no workload or device of its own. The
    heap is frozen for all of it: the arrival trials, which give the headline, as well as the
    closed loop's epochs."""
    with frozen_heap():
        return asyncio.run(_measure(spec))


async def _measure(spec: RunSpec) -> Metrics:
    own = ServeSettings.of(spec)

    url = own.endpoint
    assert url is not None  # the spec requires it for serve
    start = time.perf_counter()
    lengths = (
        endpoint.read_lengths(Path(own.lengths))
        if own.lengths
        else [(own.prompt_tokens, own.new_tokens)]
    )
    rng = random.Random(spec.seed)
    model = spec.workload.removeprefix("served/")
    named: list[str] = []  # the model as the first answer that named it calls it
    sent = endpoint.headers(own.api_key_env)
    async with endpoint.session(sent) as client:

        async def send(trial_start: float, asked: tuple[int, int] | None = None) -> ServedRequest:
            prompt_words, new_tokens = asked or rng.choice(lengths)
            text = endpoint.prompt(rng, prompt_words)
            reply = await endpoint.complete(
                client, url, model, text, new_tokens, own.request_timeout_s, own.chat
            )
            if reply.model and not named:
                named.append(reply.model)
            empty = None if reply.chunks else "empty stream: the server answered with no text"
            return ServedRequest(
                sent_s=reply.sent - trial_start,
                prompt_tokens=reply.prompt_tokens,
                output_tokens=reply.output_tokens or len(reply.chunks),
                chunk_ms=[(t - reply.sent) * 1e3 for t in reply.chunks],
                error=reply.error or empty,
            )

        build_s = time.perf_counter() - start
        metrics, loop = await closed_loop(spec, send, build_s)
        capacity = metrics.items_per_s
        trials = [loop]
        # The headline is an arrival trial's: what else the host did is read over the trials.
        monitor = HostMonitor(spec, HOST)
        meter: WindowMeter = (
            power_series.meter(own.power_series)
            if own.power_series
            else server_meter(server_pids(url))
        )
        monitor.start()
        if own.trace is not None:
            trace = endpoint.read_trace(Path(own.trace))
            trials.append(await replay(spec, send, trace, meter))
            reported: int | None = 1
            search = (
                f"the trace {Path(own.trace).name}, {len(trace)} requests over "
                f"{trace[-1][0]:.4g} s, replayed"
            )
        elif own.rate_per_s is not None:
            trials.append(await arrivals(spec, send, own.rate_per_s, meter))
            reported = 1
            search = f"the given rate, {own.num_queries} requests"
            if own.ramp_to_per_s is not None:
                search = (
                    f"a linear ramp from {own.rate_per_s:g}/s to {own.ramp_to_per_s:g}/s, "
                    f"{own.num_queries} requests"
                )
        else:
            reported, low, high = None, 0.0, capacity
            for _ in range(SEARCH_TRIALS):
                if interruption.requested():
                    break
                trials.append(await arrivals(spec, send, (low + high) / 2, meter))
                if meets_slo(spec, trials[-1]):
                    low, reported = (low + high) / 2, len(trials) - 1
                else:
                    high = (low + high) / 2
            search = (
                f"bisection of (0, {capacity:.4g}/s], the closed loop's capacity at "
                f"{spec.batch_size} in flight, in {SEARCH_TRIALS} trials of {own.num_queries} "
                "requests"
            )
    host = monitor.stop()
    serve = ServeMetrics(
        server_model=named[0] if named else None,
        slo_share=SLO_SHARE,
        trials=trials,
        reported=reported,
        search=search,
        server_devices=meter.boards if isinstance(meter, CounterMeter) else None,
    )
    return metrics.model_copy(update={"record": serve, "host": host})


async def closed_loop(spec: RunSpec, send: Send, build_s: float) -> tuple[Metrics, ServeTrial]:
    """The closed loop's epochs as a record whose steps are batch_size requests ended, and its
    steady requests as a trial."""
    own = ServeSettings.of(spec)
    raw, served, ended = Raw(), [], []
    per_epoch = spec.steps_per_epoch * spec.batch_size
    for _ in measured_epochs(spec, HOST, raw):
        epoch_start, todo = time.perf_counter(), itertools.count()

        async def client(epoch_start: float = epoch_start, todo: itertools.count = todo) -> None:
            while next(todo) < per_epoch:  # a stop takes effect between epochs
                served.append(await send(epoch_start, None))
                ended.append(time.perf_counter() - epoch_start)

        await asyncio.gather(*(client() for _ in range(spec.batch_size)))
        marks = ended[-per_epoch:][spec.batch_size - 1 :: spec.batch_size]
        raw.step_ms += [(b - a) * 1e3 for a, b in itertools.pairwise([0.0, *marks])]
    if not served or all(r.error for r in served):
        reason = next((r.error for r in served if r.error), "no request was sent")
        raise AccelbenchError(f"every request to {own.endpoint} failed: {reason}")
    raw.wait_ms = [0.0] * len(raw.step_ms)  # the prompts are made before each is sent
    metrics = build_metrics(
        spec, Requests(), raw, [], timer="wall-clock", build_s=build_s, flops=None
    )
    steady = served[metrics.steady_from_step * spec.batch_size :]
    loop = trial(spec, steady, None, spec.batch_size, metrics.delivered.time_s)
    fixed = own.lengths is None and all(r.output_tokens == own.new_tokens for r in steady)
    # The client's energy says nothing of the server's: none is given.
    update = {
        "energy": None,
        "joules_per_item": None,
        "tokens_per_item": own.new_tokens if fixed else None,
    }
    return metrics.model_copy(update=update), loop


def arrival_times(
    rate: float, count: int, burstiness: float, seed: str, ramp_to: float | None = None
) -> list[float]:
    """Send times, seconds from a trial's start: gaps of mean 1/rate from a gamma distribution
    of shape `burstiness` (vLLM's --burstiness), exponential at 1, a Poisson process (drawn as
    before there, so a seed gives the arrivals it always gave). With `ramp_to`, the rate rises
    (or falls) linearly from `rate` to it over the time `count` requests take on average: the
    same gaps drawn at rate 1, each arrival's time then mapped through the inverse of the
    ramp's cumulative rate (the time-rescaling theorem), so the burstiness holds throughout."""
    rng = random.Random(seed)
    if ramp_to is None:
        if burstiness == 1:
            gaps = (rng.expovariate(rate) for _ in range(count))
        else:
            gaps = (rng.gammavariate(burstiness, 1 / (rate * burstiness)) for _ in range(count))
        return list(itertools.accumulate(gaps))
    units = (
        rng.expovariate(1.0) if burstiness == 1 else rng.gammavariate(burstiness, 1 / burstiness)
        for _ in range(count)
    )
    slope = (ramp_to - rate) / (2 * count / (rate + ramp_to))  # over the mean duration
    times = []
    for s in itertools.accumulate(units):  # solve rate t + slope t^2 / 2 = s for t
        if slope == 0:
            times.append(s / rate)
        elif (discriminant := rate * rate + 2 * slope * s) >= 0:
            times.append((math.sqrt(discriminant) - rate) / slope)
        else:  # a falling ramp reached a rate of zero: no more arrivals
            break
    return times


async def arrivals(
    spec: RunSpec, send: Send, rate: float, meter: WindowMeter | None = None
) -> ServeTrial:
    """spec.num_queries requests arriving at `rate` (arrival_times: spec.burstiness, and a ramp
    to spec.ramp_to_per_s), each sent at its time whatever is in flight; none is sent after
    spec.max_measure_s. A ramp's trial is filed under its mean rate."""
    own = ServeSettings.of(spec)
    ramp = own.ramp_to_per_s
    times = arrival_times(
        rate, own.num_queries, own.burstiness, f"{spec.seed}/{rate}", ramp_to=ramp
    )
    mean = rate if ramp is None else (rate + ramp) / 2
    return await _send_at(spec, send, [(t, None) for t in times], mean, meter)


async def replay(
    spec: RunSpec,
    send: Send,
    trace: list[tuple[float, int, int]],
    meter: WindowMeter | None = None,
) -> ServeTrial:
    """The trace's requests, each sent at its time with its lengths (endpoint.read_trace)."""
    rate = _rate([t for t, _, _ in trace])
    return await _send_at(spec, send, [(t, (p, n)) for t, p, n in trace], rate, meter)


async def _send_at(
    spec: RunSpec,
    send: Send,
    plan: list[tuple[float, tuple[int, int] | None]],
    rate: float | None,
    meter: WindowMeter | None,
) -> ServeTrial:
    """Each request of `plan` sent at its time (seconds from now) whatever is in flight; none
    after spec.max_measure_s; the server's energy metered over it all."""
    at_rate = f" at {rate:.3g}/s" if rate else ""
    progress.phase(f"serving trial: {len(plan)} requests{at_rate}")
    if meter is not None:
        meter.start()
    start, tasks = time.perf_counter(), list[asyncio.Task[ServedRequest]]()
    for at, asked in plan:
        if at > spec.max_measure_s or interruption.requested():
            break
        await asyncio.sleep(max(0.0, at - (time.perf_counter() - start)))
        tasks.append(asyncio.create_task(send(start, asked)))
    served = list(await asyncio.gather(*tasks))
    drawn = None if meter is None else meter.stop()
    first = min((r.sent_s for r in served), default=0.0)
    done = trial(spec, served, rate, None, time.perf_counter() - start - first)
    return done.model_copy(update={"energy": drawn})


def trial(
    spec: RunSpec,
    served: list[ServedRequest],
    rate: float | None,
    concurrency: int | None,
    duration_s: float,
) -> ServeTrial:
    """A trial's record from its requests."""
    ok = [r for r in served if r.error is None and r.chunk_ms]
    within = [r for r in ok if within_slo(spec, r)]
    itl = [b - a for r in ok for a, b in itertools.pairwise(r.chunk_ms)]
    tpot = [t for r in ok if (t := r.tpot_ms) is not None]
    per_s = 1 / duration_s if duration_s > 0 else 0.0
    ends = [r.sent_s + r.chunk_ms[-1] / 1e3 for r in ok]
    return ServeTrial(
        rate_per_s=rate,
        concurrency=concurrency,
        duration_s=duration_s,
        requests=served,
        ttft_ms=summarize([r.chunk_ms[0] for r in ok]) if ok else None,
        tpot_ms=summarize(tpot) if tpot else None,
        itl_ms=summarize(itl) if itl else None,
        e2el_ms=summarize([r.chunk_ms[-1] for r in ok]) if ok else None,
        requests_per_s=len(ok) * per_s,
        output_tokens_per_s=sum(r.output_tokens for r in ok) * per_s,
        goodput_per_s=len(within) * per_s,
        within_slo=len(within) / len(served) if served else 0.0,
        sent_per_s=_rate([r.sent_s for r in served]),
        ended_per_s=_rate(ends),
    )


def _rate(times_s: list[float]) -> float | None:
    """Events per second over the span of their times: (count - 1) / (last - first)."""
    span = max(times_s, default=0.0) - min(times_s, default=0.0)
    return (len(times_s) - 1) / span if len(times_s) > 1 and span > 0 else None


def within_slo(spec: RunSpec, request: ServedRequest) -> bool:
    """Whether a request succeeded with its TTFT and TPOT (where it has one) within target."""
    own = ServeSettings.of(spec)
    ttft, tpot = request.ttft_ms, request.tpot_ms
    return (
        ttft is not None and ttft <= own.slo_ttft_ms and (tpot is None or tpot <= own.slo_tpot_ms)
    )


def meets_slo(spec: RunSpec, t: ServeTrial) -> bool:
    """Whether a rate met the SLO: SLO_SHARE of its requests within it, answered about as fast
    as they came (against the rate realised, not the nominal one)."""
    return t.within_slo >= SLO_SHARE and keeps_up(t)
