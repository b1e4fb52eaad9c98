"""The training scenario: epochs of optimizer steps on host-generated data, timed per step."""

from __future__ import annotations

import itertools
import math
import time

import torch

from accelbench import device as dev
from accelbench.data import make_loader
from accelbench.engine import make_engine
from accelbench.result import EpochMetrics, TrainMetrics
from accelbench.spec import RunSpec
from accelbench.stats import summarize
from accelbench.workload import Workload


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> TrainMetrics:
    torch.manual_seed(spec.seed)
    start = time.perf_counter()
    engine = make_engine(workload, spec, device)
    loader = make_loader(workload, spec, pin_memory=device.type == "cuda")
    build_s = time.perf_counter() - start

    timer = dev.StepTimer(device)
    # Each step's loss is written on the device and read back once per epoch: no per-step sync.
    losses = torch.empty(spec.steps_per_epoch, device=device)
    epoch_s, step_ms, wait_ms, step_loss = [], [], [], []
    dev.reset_peak_memory(device)
    dev.synchronize(device)
    measure_start = time.perf_counter()
    for _ in range(spec.epochs):
        epoch_start = time.perf_counter()
        timer.mark()
        batches = iter(loader)
        for step in range(spec.steps_per_epoch):
            wait_start = time.perf_counter()  # host time blocked on the input pipeline
            micro_batches = list(itertools.islice(batches, spec.grad_accum))
            wait_ms.append((time.perf_counter() - wait_start) * 1e3)
            losses[step] = engine.step(micro_batches)
            timer.mark()
        step_ms += timer.intervals_ms()  # synchronizes: the epoch's work is done
        epoch_s.append(time.perf_counter() - epoch_start)
        step_loss += losses.tolist()
    measure_s = time.perf_counter() - measure_start
    peak_allocated, peak_reserved = dev.peak_memory_gib(device)
    del loader  # stops loader workers, so their peak memory is counted below
    return _metrics(
        spec, workload, timer=timer.method, epoch_s=epoch_s, step_ms=step_ms, wait_ms=wait_ms,
        step_loss=step_loss, peak_allocated=peak_allocated, peak_reserved=peak_reserved, build_s=build_s,
        measure_s=measure_s,
    )  # fmt: skip


def _metrics(
    spec: RunSpec,
    workload: Workload,
    *,
    timer: dev.TimerMethod,
    epoch_s: list[float],
    step_ms: list[float],
    wait_ms: list[float],
    step_loss: list[float],
    peak_allocated: float | None,
    peak_reserved: float | None,
    build_s: float,
    measure_s: float,
) -> TrainMetrics:
    n = spec.steps_per_epoch
    epochs = []
    for index, seconds in enumerate(epoch_s):
        loss = step_loss[index * n : (index + 1) * n]
        epochs.append(
            EpochMetrics(
                index=index + 1,
                num_steps=n,
                num_items=n * spec.global_batch,
                time_s=seconds,
                items_per_s=n * spec.global_batch / seconds,
                loss_last=loss[-1],
                loss_mean=sum(loss) / n,
            )
        )
    steady_from = n if spec.epochs > 1 else min(1, n - 1)
    steady, steady_wait = step_ms[steady_from:], wait_ms[steady_from:]
    window = min(spec.window_steps, len(steady))
    windows_ms = [sum(steady[i : i + window]) for i in range(0, len(steady) - window + 1, window)]
    diverged = next((i for i, value in enumerate(step_loss) if not math.isfinite(value)), None)
    return TrainMetrics(
        item_unit=workload.item_unit,
        items_per_step=spec.global_batch,
        timer=timer,
        epochs=epochs,
        step_ms=step_ms,
        loss=step_loss,
        steady_from_step=steady_from,
        step_ms_steady=summarize(steady),
        window_items_per_s=summarize(
            [window * spec.global_batch / (ms / 1e3) for ms in windows_ms]
        ),
        input_wait_ms=wait_ms,
        input_wait_frac=min(1.0, sum(steady_wait) / sum(steady)),
        compute_items_per_s=len(steady)
        * spec.global_batch
        / (max(sum(steady) - sum(steady_wait), 1e-9) / 1e3),
        first_step_ms=step_ms[0],
        diverged_at_step=diverged,
        peak_mem_allocated_gib=peak_allocated,
        peak_mem_reserved_gib=peak_reserved,
        host_peak_rss_gib=dev.host_peak_rss_gib(),
        build_s=build_s,
        measure_s=measure_s,
    )
