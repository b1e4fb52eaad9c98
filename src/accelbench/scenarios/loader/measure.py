"""The loader scenario's measurement (scenarios/loader): each step is one batch drawn."""

from __future__ import annotations

import time

import torch

from accelbench.execution import device as dev
from accelbench.execution.data import make_loader
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, measured_epochs
from accelbench.workload import Workload


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    start = time.perf_counter()
    loader = make_loader(workload, spec, pin_memory=device.type == "cuda")
    build_s = time.perf_counter() - start
    raw = Raw()
    for _ in measured_epochs(spec, device, raw):
        batches = iter(loader)  # a pass: workers start on the first, then persist
        for _ in range(spec.steps_per_epoch):
            drawn = time.perf_counter()
            next(batches)
            raw.step_ms.append((time.perf_counter() - drawn) * 1e3)
    raw.wait_ms = [0.0] * len(raw.step_ms)  # it waits for nothing but itself
    raw.host_rss = dev.host_peak_rss_gib()
    return build_metrics(spec, workload, raw, [], timer="wall-clock", build_s=build_s, flops=None)
