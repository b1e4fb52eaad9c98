"""The training scenario: epochs of optimizer steps on host data (or a few batches kept on the
device, with inputs_on_device), timed per step.

Epoch 1 holds compilation and warm-up and is reported apart; the steady state, its delivered
rate and the epochs a CI target adds are the shared kit's (scenarios/epochs.py).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import torch

from accelbench.execution import device as dev
from accelbench.execution import distributed
from accelbench.execution.data import make_loader
from accelbench.execution.engine import Engine, make_engine
from accelbench.records.result import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import (
    Raw,
    across_ranks,
    build_metrics,
    count_flops,
    measured_epochs,
)
from accelbench.workload import Batch, Workload

DEVICE_BATCHES = 4
"""Distinct batches cycled with inputs_on_device: a few, so that consecutive steps differ."""


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    torch.manual_seed(spec.seed)
    start = time.perf_counter()
    engine = make_engine(workload, spec, device)
    loader = make_loader(
        workload, spec, pin_memory=device.type == "cuda", rank=distributed.data_index(spec)
    )
    # With inputs on the device: a few batches made once, kept there and cycled.
    pool = (
        [engine.to_device(b) for b in itertools.islice(iter(loader), DEVICE_BATCHES)]
        if spec.inputs_on_device
        else []
    )
    build_s = time.perf_counter() - start

    timer = dev.StepTimer(device)
    losses = torch.empty(spec.steps_per_epoch, device=device)
    raw = Raw()
    for _ in measured_epochs(spec, device, raw):
        train_epoch(
            spec, engine, itertools.cycle(pool) if pool else iter(loader), timer, losses, raw
        )
    raw.peak_allocated, raw.peak_reserved = dev.peak_memory_gib(device)
    raw.state_gib = engine.held_gib()
    # Counted after the timing, so that it cannot warm anything up for the first step.
    example = next(iter(loader))
    flops = count_flops(spec, workload, engine, example, device)
    routed = engine.expert_load(example)
    del loader  # stops loader workers, so their peak memory is counted below
    raw.host_rss = dev.host_peak_rss_gib()
    raw, ranks = across_ranks(spec, raw)
    metrics = build_metrics(
        spec, workload, raw, ranks, timer=timer.method, build_s=build_s, flops=flops
    )
    return metrics.model_copy(update={"trainable_params": engine.trainable, "expert_load": routed})


def train_epoch(
    spec: RunSpec,
    engine: Engine,
    batches: Iterator[Batch],
    timer: dev.StepTimer,
    losses: torch.Tensor,
    raw: Raw,
) -> None:
    """spec.steps_per_epoch optimizer steps on micro-batches from `batches`, their step times,
    input waits and losses appended to raw; returns once the device has finished them. Each
    step's loss is written into `losses` on the device and read back at the end: no per-step
    sync."""
    timer.mark()
    for step in range(spec.steps_per_epoch):
        wait_start = time.perf_counter()  # host time blocked on the input pipeline
        micro_batches = list(itertools.islice(batches, spec.grad_accum))
        raw.wait_ms.append((time.perf_counter() - wait_start) * 1e3)
        losses[step] = engine.step(micro_batches)
        timer.mark()
    raw.step_ms += timer.intervals_ms()  # synchronizes: the epoch's work is done
    raw.step_loss += losses.tolist()
