"""The measuring kit every scenario shares: the epochs to measure (`measured_epochs`), what a
process records (`Raw`), the steady state and its delivered rate, the merge across ranks, the
FLOP count, and the metrics built from it all (`build_metrics`)."""

from __future__ import annotations

import dataclasses
import gc
import logging
import math
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from accelbench import scenarios
from accelbench.engines import Device, Timer, TimerMethod
from accelbench.errors import one_line
from accelbench.execution import distributed, interruption, progress, sharding
from accelbench.execution.meters.energy import EnergyMeter
from accelbench.execution.meters.host import HostMonitor
from accelbench.records import contention, throughput
from accelbench.records.energy import EnergyMetrics
from accelbench.records.energy import combine as combine_energy
from accelbench.records.metrics import NO_CPU_PEAK, EpochMetrics, Flops, Metrics, RankMetrics
from accelbench.records.spec import RunSpec
from accelbench.records.stats import Summary, summarize, warmup_end
from accelbench.workload import Batch, Workload

if TYPE_CHECKING:  # the kit imports no framework: a serving client's cell needs no torch
    import torch

log = logging.getLogger(__name__)


def measured_epochs(spec: RunSpec, device: Device | torch.device, raw: Raw) -> Iterator[int]:
    """The epochs to measure, for the caller to run one per iteration: `spec.epochs`, then more
    until the CI target is met or its time runs out, or fewer if a stop is requested after one.
    Times each into raw.epoch_s (the caller's last act in it must wait for the device), and
    meters energy and the host's activity over the steady epochs (all of a one-epoch run) into
    raw.energy and raw.host. Any engine's device (engines.Device); a torch.device is taken as
    one. What the process holds as they start is left out of the collector's passes
    (frozen_heap)."""
    device = _engine_device(device)
    meter, monitor = EnergyMeter(device), HostMonitor(spec, device)
    device.reset_peak_memory()
    device.synchronize()
    with frozen_heap():
        measure_start = time.perf_counter()
        while len(raw.epoch_s) < spec.epochs or not precise_enough(spec, raw, measure_start):
            if raw.epoch_s and interruption.requested():  # stopped: keep the epochs measured
                break
            progress.phase(progress.epoch_text(len(raw.epoch_s), spec.epochs))  # not timed
            if len(raw.epoch_s) == min(1, spec.epochs - 1):
                meter.start()
                monitor.start()
            epoch_start = time.perf_counter()
            yield len(raw.epoch_s)
            raw.epoch_s.append(time.perf_counter() - epoch_start)
        raw.energy, raw.host = meter.stop(), monitor.stop()
        raw.measure_s = time.perf_counter() - measure_start


_FROZEN: list[None] = []
"""One entry for each frozen_heap block in progress."""


@contextmanager
def frozen_heap() -> Iterator[None]:
    """What the process holds as the block starts kept out of the garbage collector's passes
    until it ends (gc.freeze): a measurement's own objects set off full passes, which otherwise
    walk a framework's few hundred thousand (0.13 s a pass here, a pause in what it fell in).
    A block inside another is the outer one's."""
    if not _FROZEN:
        gc.freeze()
    _FROZEN.append(None)
    try:
        yield
    finally:
        _FROZEN.pop()
        if not _FROZEN:
            gc.unfreeze()


def lagged_epochs(
    spec: RunSpec,
    device: Device,
    raw: Raw,
    batches: Iterator[Any],
    step: Callable[[Any], Any],
    losses: Callable[[], list[float]],
) -> TimerMethod:
    """The measured epochs of an engine that dispatches steps asynchronously and times them by
    its device's timer (engines.LaggedTimer): `step(batch)` dispatches one and returns what the
    timer waits for (its loss), without waiting for it. Each step's input wait and time go into
    raw, and the steps' losses, which the engine keeps (on the device, as torch's train
    scenario does; as numbers where a step has run by the time it returns), are read by
    `losses()` once the epochs are over (a copy a step from the device inside the timed epoch
    held JAX's 0.1 ms tiny_mlp steps to 0.8 of a bare loop). Returns the timer's method."""
    timer = device.timer()
    for _ in measured_epochs(spec, device, raw):
        lagged_epoch(spec, timer, raw, batches, step)
    raw.step_loss = losses()
    return timer.method


def lagged_epoch(
    spec: RunSpec, timer: Timer, raw: Raw, batches: Iterator[Any], step: Callable[[Any], Any]
) -> None:
    """One epoch of such an engine's steps, each step's input wait and time into raw; what a
    step returns is held only until the timer has waited for it."""
    timer.mark()
    for _ in range(spec.steps_per_epoch):
        wait_start = time.perf_counter()  # host time making the next batch
        batch = next(batches)
        raw.wait_ms.append((time.perf_counter() - wait_start) * 1e3)
        timer.mark(step(batch))
    raw.step_ms += timer.intervals_ms()  # waits for the epoch's last step


@dataclass
class Raw:
    """What one process measured, in the units of Metrics' fields."""

    epoch_s: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    """Where step_ms are latencies (inference): the time from one answer to the next, which
    the delivered rate is made of; empty where it is step_ms (training's marks are contiguous)."""
    wait_ms: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)
    peak_allocated: float | None = None
    peak_reserved: float | None = None
    state_gib: float | None = None
    host_rss: float = 0.0
    energy: EnergyMetrics | None = None
    host: contention.HostActivity | None = None
    measure_s: float = 0.0


def across_ranks(spec: RunSpec, raw: Raw) -> tuple[Raw, list[RankMetrics]]:
    """The run as a whole from every replica's raw figures, and each replica's own summary.

    Replicas wait for each other at every gradient exchange, so the run lasts as long as its
    slowest rank: the run's step, epoch and input-wait times are those of the rank whose epochs
    took longest, all from that one rank, so that the headline (steady items over the stored
    steady seconds) is reproduced from the stored epoch times; never an average of per-rank
    rates. (Per-step maxima over ranks added up to 3-8% more than any rank's epochs: a rank's
    slow step and another's next one overlap in wall time.) Peaks are the maxima over ranks.
    Replicas' losses are averaged, as their gradients are; a pipeline's is its last stage's.
    Energy adds up the devices' own counters.
    """
    if spec.num_processes == 1:
        return raw, []
    mine = {
        "raw": dataclasses.asdict(raw)
        | {
            "energy": raw.energy and raw.energy.model_dump(),
            "host": raw.host and raw.host.model_dump(),
        },
        "hostname": socket.gethostname(),
        "local_rank": distributed.local_index(),
        "numa_node": distributed.numa_node(),
    }
    everyone = distributed.gather(mine)
    raws = [Raw(**(r["raw"] | {"energy": None, "host": None})) for r in everyone]
    energies = [EnergyMetrics.model_validate(r["raw"]["energy"]) for r in everyone]
    slowest = max(raws, key=lambda r: sum(r.epoch_s))
    combined = Raw(
        epoch_s=slowest.epoch_s,
        step_ms=slowest.step_ms,
        wait_ms=slowest.wait_ms,
        step_loss=(
            raws[-1].step_loss  # a pipeline's loss is its last stage's
            if spec.pipeline_stages > 1
            else [statistics.fmean(x) for x in zip(*(r.step_loss for r in raws), strict=True)]
        ),
        peak_allocated=_max_or_none(r.peak_allocated for r in raws),
        peak_reserved=_max_or_none(r.peak_reserved for r in raws),
        state_gib=_max_or_none(r.state_gib for r in raws),
        host_rss=max(r.host_rss for r in raws),
        energy=combine_energy(
            [(i["hostname"], e) for i, e in zip(everyone, energies, strict=True)]
        ),
        host=_combined_host(everyone),
    )
    # Each rank over the headline's own window (its steps, each with its share of the epoch's
    # wall clock), so that the ranks' rates and the headline tell one story.
    first = steady_state(spec, combined.step_ms)[0]
    ranks = []
    for index, (info, rank_raw) in enumerate(zip(everyone, raws, strict=True)):
        wall = throughput.wall_ms(rank_raw.step_ms, rank_raw.epoch_s, spec.steps_per_epoch)
        steady = wall[first:]
        waits = rank_raw.wait_ms[-len(steady) :]
        rate = len(steady) * spec.batch_size * spec.grad_accum / (sum(steady) / 1e3)
        ranks.append(
            RankMetrics(
                rank=index,
                hostname=info["hostname"],
                local_rank=info["local_rank"],
                numa_node=info["numa_node"],
                items_per_s=rate,
                step_ms_median=statistics.median(rank_raw.step_ms[first:]),
                input_wait_frac=min(1.0, sum(waits) / sum(steady)),
                peak_mem_allocated_gib=rank_raw.peak_allocated,
                peak_mem_reserved_gib=rank_raw.peak_reserved,
                state_gib=rank_raw.state_gib,
                host_peak_rss_gib=rank_raw.host_rss,
                first_steady_step=first,
            )
        )
    return combined, ranks


def _combined_host(everyone: list[dict[str, Any]]) -> contention.HostActivity | None:
    if any(r["raw"]["host"] is None for r in everyone):
        return None
    readings = [contention.HostActivity.model_validate(r["raw"]["host"]) for r in everyone]
    return contention.combine([(r["hostname"], a) for r, a in zip(everyone, readings, strict=True)])


def _max_or_none(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def first_steady_step(spec: RunSpec, step_ms: list[float]) -> int:
    """Epoch 2's first step; step 1 of a one-epoch run."""
    return spec.steps_per_epoch if len(step_ms) > spec.steps_per_epoch else min(1, len(step_ms) - 1)


def steady_state(spec: RunSpec, cycle_ms: list[float]) -> tuple[int, Summary]:
    """(first steady step, window throughputs) from each step's time from the previous one's
    end. The steady state is whole epochs, so that its rate is the one their times give: those
    after epoch 1, less any the warm-up detector finds still warming up while one is left after
    them (a one-epoch run: all but its first step). Epoch boundaries are left out of these
    times, so a slow first batch of an epoch is not taken for warm-up. Windows are of
    spec.window_steps steps."""
    n = spec.steps_per_epoch
    first = first_steady_step(spec, cycle_ms)
    found = first + warmup_end(_window_rates(spec, cycle_ms[first:])) * spec.window_steps
    boundary = -(-found // n) * n  # the first epoch start at or after the warm-up's end
    start = boundary if boundary < len(cycle_ms) else first
    return start, summarize(_window_rates(spec, cycle_ms[start:]))


def _window_rates(spec: RunSpec, cycle_ms: list[float]) -> list[float]:
    window = max(1, min(spec.window_steps, len(cycle_ms)))
    starts = range(0, len(cycle_ms) - window + 1, window)
    return [window * spec.global_batch / (sum(cycle_ms[i : i + window]) / 1e3) for i in starts]


def delivered(spec: RunSpec, raw: Raw) -> tuple[int, Summary, throughput.Delivered]:
    """(first steady step, window throughputs, delivered rate) of what was measured so far: the
    steady epochs' items over their seconds."""
    cycles = raw.cycle_ms or raw.step_ms
    first, windows = steady_state(spec, cycles)
    wall = throughput.wall_ms(cycles, raw.epoch_s, spec.steps_per_epoch)
    return first, windows, throughput.delivered(wall[first:], spec.global_batch)


def _engine_device(device: Device | torch.device) -> Device:
    """An engine's device as it is; a torch.device as torch's engine's Device. None can exist
    unless torch is imported: the kit itself imports no framework."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        from accelbench.execution.device import TorchDevice

        return TorchDevice(device)
    return cast("Device", device)


def precise_enough(spec: RunSpec, raw: Raw, measure_start: float) -> bool:
    """Whether to stop measuring: once the steady state lasts spec.min_steady_s and, with a CI
    target, its interval is as narrow as the target over a steady state long enough to be judged
    (contention.MIN_WINDOW_S; a narrow interval over 50 ms of steps is still flagged too-short);
    or once the time budget would pass. Rank 0 decides for all replicas, which must stop
    together."""
    if spec.ci_pct is None and not spec.min_steady_s:
        return True
    # The budget is an upper bound: stop when another epoch as long as the last would pass it.
    next_epoch_s = raw.epoch_s[-1] if raw.epoch_s else 0.0
    done = time.perf_counter() - measure_start + next_epoch_s > spec.max_measure_s
    if not done:
        rate = delivered(spec, raw)[2]
        narrow = spec.ci_pct is None or (rate.ci_pct is not None and rate.ci_pct <= spec.ci_pct)
        least_s = max(spec.min_steady_s, contention.MIN_WINDOW_S if spec.ci_pct else 0.0)
        done = narrow and rate.time_s >= least_s
    return distributed.first_says(done)


class FlopCounter(Protocol):
    def count_flops(self, micro_batch: Batch) -> float | None: ...


def count_flops(
    spec: RunSpec,
    workload: Workload,
    engine: FlopCounter,
    micro_batch: Batch,
    device: torch.device,
) -> Flops | None:
    import torch

    from accelbench.execution import efficiency

    if efficiency.PEAK_CLASS[spec.precision] == "int8":
        return None  # no int8 peak to divide by: an fp32 one would flatter int8 runs
    try:
        with efficiency.counter_sees_all():
            per_micro_batch = engine.count_flops(micro_batch)
    except Exception as exc:  # an op the counter cannot run must not cost the measurement
        log.warning("FLOPs not counted: %s", one_line(exc))
        return None
    if not per_micro_batch:
        return None
    if device.type == "cpu":
        peak: tuple[float | None, str] = (None, NO_CPU_PEAK)
    else:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
        found = efficiency.datasheet_peak(name, spec.precision) if name else None
        peak = found or efficiency.measured_peak(device, spec.precision)
    training = scenarios.get(spec.scenario).trains
    # 6 per weight assumes every weight's gradient: a LoRA run's frozen ones take 4, the
    # counter sees that, no formula is given for it.
    formula = workload.analytic_flops if spec.lora_rank is None else None
    analytic = formula(training) if formula else None
    return Flops(
        per_item=per_micro_batch / spec.batch_size,
        analytic_per_item=analytic,
        active_share=workload.active_share if analytic else None,
        floor_per_item=efficiency.flops_floor(workload, training),
        peak_per_s=peak[0],
        peak_source=peak[1],
        num_devices=spec.num_processes,
    )


class Items(Protocol):
    """What the items of a step are (a Workload says it, and a client scenario of its own)."""

    @property
    def item_unit(self) -> str: ...

    @property
    def tokens_per_item(self) -> int | None: ...


def build_metrics(
    spec: RunSpec,
    items: Items,
    raw: Raw,
    ranks: list[RankMetrics],
    *,
    timer: TimerMethod,
    build_s: float,
    flops: Flops | None,
    metered_from_epoch: int | None = None,
) -> Metrics:
    """The record of the raw figures. Energy was metered from epoch index `metered_from_epoch`
    on (default: the steady epochs, all of a one-epoch run), as measured_epochs meters it."""
    n = spec.steps_per_epoch
    step_ms, wait_ms, step_loss, energy = raw.step_ms, raw.wait_ms, raw.step_loss, raw.energy
    assert energy is not None, "the meter has been read"
    epochs = []
    for index, seconds in enumerate(raw.epoch_s):
        loss = step_loss[index * n : (index + 1) * n]
        epochs.append(
            EpochMetrics(
                index=index + 1,
                num_steps=n,
                num_items=n * spec.global_batch,
                time_s=seconds,
                items_per_s=n * spec.global_batch / seconds,
                loss_last=loss[-1] if loss else None,
                loss_mean=sum(loss) / n if loss else None,
            )
        )
    first, windows, rate = delivered(spec, raw)
    wait_s = sum(wait_ms[first:]) / 1e3
    diverged = next((i for i, value in enumerate(step_loss) if not math.isfinite(value)), None)
    if metered_from_epoch is None:
        metered_from_epoch = min(1, len(epochs) - 1)
    metered_items = sum(e.num_items for e in epochs[metered_from_epoch:])
    return Metrics(
        item_unit=items.item_unit,
        items_per_step=spec.global_batch,
        tokens_per_item=items.tokens_per_item,
        layout=sharding.layout(spec),
        timer=timer,
        epochs=epochs,
        step_ms=step_ms,
        loss=step_loss,
        steady_from_step=first,
        step_ms_steady=summarize(step_ms[first:]),
        delivered=rate,
        window_items_per_s=windows,
        ci_met=None if spec.ci_pct is None else (rate.ci_pct or math.inf) <= spec.ci_pct,
        input_wait_ms=wait_ms,
        input_wait_frac=min(1.0, wait_s / rate.time_s),
        loader_workers=spec.loader_workers(),
        # None when the host clock says it waited all the time: nothing left to estimate from.
        compute_items_per_s=rate.num_items / (rate.time_s - wait_s)
        if rate.time_s > wait_s
        else None,
        first_step_ms=step_ms[0],
        diverged_at_step=diverged,
        peak_mem_allocated_gib=raw.peak_allocated,
        peak_mem_reserved_gib=raw.peak_reserved,
        state_gib=raw.state_gib,
        host_peak_rss_gib=raw.host_rss,
        build_s=build_s,
        measure_s=raw.measure_s,
        energy=energy,
        joules_per_item=energy.joules / metered_items if energy.joules is not None else None,
        flops=flops,
        host=raw.host,
        ranks=ranks,
    )
