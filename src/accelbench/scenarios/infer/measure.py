"""The inference scenario: forward passes of one batch at a time, each timed to its answer.

A batch is a query that arrives on the host, as in MLPerf's single-stream (batch 1) and offline
(large batches) scenarios: its copy to the device, the forward pass under inference_mode and the
wait for the result are inside its time, so each step time is that batch's latency, and there is
one synchronisation per batch because a latency needs it. The throughput is delivered: items
over the time from one answer to the next, what happens between batches included. Epoch 1 holds
compilation and warm-up; the later epochs give the latency percentiles and the throughput.
"""

from __future__ import annotations

import itertools
import time
import warnings

import torch

from accelbench.execution import device as dev
from accelbench.execution.data import make_loader
from accelbench.execution.optim import to_device
from accelbench.execution.precision import torch_settings
from accelbench.records.result import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, count_flops, measured_epochs
from accelbench.workload import Batch, Workload

NUM_QUERIES = 8
"""Distinct host batches drawn from the loader before timing and sent in turn."""


class Forward:
    """The model in inference mode on its device, in the spec's precision."""

    def __init__(self, workload: Workload, spec: RunSpec, device: torch.device) -> None:
        self.settings = torch_settings(spec.precision)
        self.device, self.dtype = device, self.settings.param_dtype
        self.memory_format = torch.channels_last if spec.channels_last else torch.contiguous_format
        model = workload.build_model().to(device=device, dtype=self.dtype)
        model = model.to(memory_format=self.memory_format).eval()
        self.eager = _quantised(model) if spec.precision == "int8-dynamic" else model
        self.model: torch.nn.Module = (
            torch.compile(self.eager, mode=spec.compile_mode)  # type: ignore[assignment]
            if spec.compile
            else self.eager
        )
        self.loss = workload.loss

    def to_device(self, batch: Batch) -> Batch:
        return {
            k: to_device(v, self.device, self.dtype, self.memory_format) for k, v in batch.items()
        }

    def __call__(self, batch: Batch, model: torch.nn.Module | None = None) -> torch.Tensor:
        """The workload's output reduced by its loss head, which every workload has."""
        with torch.inference_mode(), self.settings.autocast(self.device.type):
            return self.loss(model or self.model, self.to_device(batch))

    def count_flops(self, micro_batch: Batch) -> float | None:
        from accelbench.execution.efficiency import flop_counter

        with flop_counter() as counter:
            self(micro_batch, self.eager)
        return float(counter.get_total_flops())


def _quantised(model: torch.nn.Module) -> torch.nn.Module:
    """Dynamic int8 quantisation of the layers torch has int8 kernels for (torch.ao's API,
    which torch deprecates in favour of torchao; it is what this torch ships)."""
    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, UserWarning, FutureWarning))
        layers = {torch.nn.Linear, torch.nn.LSTM, torch.nn.GRU}
        return quantize_dynamic(model, layers, dtype=torch.qint8)


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    return measure_with(spec, workload, device)[0]


def measure_with(
    spec: RunSpec, workload: Workload, device: torch.device
) -> tuple[Metrics, Forward, list[Batch]]:
    """The measurement, with the model and the queries it used, for scenarios that go on."""
    torch.manual_seed(spec.seed)
    start = time.perf_counter()
    forward = Forward(workload, spec, device)
    loader = make_loader(workload, spec, pin_memory=device.type == "cuda")
    queries = list(itertools.islice(iter(loader), NUM_QUERIES))
    if spec.inputs_on_device:
        queries = [forward.to_device(q) for q in queries]
    build_s = time.perf_counter() - start

    raw = Raw()
    for _ in measured_epochs(spec, device, raw):
        outputs = []
        answered = time.perf_counter()
        for step in range(spec.steps_per_epoch):
            sent = time.perf_counter()
            outputs.append(forward(queries[step % len(queries)]))
            dev.synchronize(device)  # answered: the result is there
            now = time.perf_counter()
            raw.step_ms.append((now - sent) * 1e3)
            raw.cycle_ms.append((now - answered) * 1e3)
            answered = now
        raw.step_loss += torch.stack(outputs).float().tolist()
    raw.wait_ms = [0.0] * len(raw.step_ms)  # queries wait on the host, ready, as in LoadGen
    raw.peak_allocated, raw.peak_reserved = dev.peak_memory_gib(device)
    flops = count_flops(spec, workload, forward, queries[0], device)
    del loader
    raw.host_rss = dev.host_peak_rss_gib()
    metrics = build_metrics(
        spec, workload, raw, [], timer="wall-clock", build_s=build_s, flops=flops
    )
    return metrics, forward, queries
