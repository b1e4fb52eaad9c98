"""The inference scenario under JAX, as torch's (scenarios/infer/measure.py): forward passes of
one host batch at a time, each timed to its answer (its copy to the device, the jitted pass and
the wait for the result), so each step time is that batch's latency and the throughput is items
over the time from one answer to the next. Epoch 1 holds tracing and XLA's compilation."""

from __future__ import annotations

import itertools
import time
from functools import partial
from typing import Any

import jax
import numpy as np

from accelbench.engines.jax import models
from accelbench.engines.jax.train import built, forward, host_batches, xla_flops
from accelbench.execution.device import host_peak_rss_gib
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, measured_epochs

NUM_QUERIES = 8
"""Distinct host batches (the records of --data, or made) taken before timing and sent in
turn, as torch's inference sends."""


def measure(spec: RunSpec) -> Metrics:
    start = time.perf_counter()
    cell = built(spec)
    forward = jax.jit(partial(_answer, cell.model, cell.compute))
    rng = np.random.default_rng(spec.seed)
    queries = list(itertools.islice(host_batches(spec, cell.model, rng), NUM_QUERIES))
    if spec.inputs_on_device:
        queries = [cell.device.put(q) for q in queries]
    build_s = time.perf_counter() - start

    raw = Raw()
    for _ in measured_epochs(spec, cell.device, raw):
        outputs = []
        answered = time.perf_counter()
        for query in itertools.islice(itertools.cycle(queries), spec.steps_per_epoch):
            sent = time.perf_counter()
            outputs.append(forward(cell.params, cell.state, query).block_until_ready())
            now = time.perf_counter()  # answered: the result is there
            raw.step_ms.append((now - sent) * 1e3)
            raw.cycle_ms.append((now - answered) * 1e3)
            answered = now
        raw.step_loss += [float(x) for x in jax.device_get(outputs)]
    raw.wait_ms = [0.0] * len(raw.step_ms)  # queries wait on the host, ready, as in LoadGen
    raw.peak_allocated, raw.peak_reserved = cell.device.peak_memory_gib()
    raw.host_rss = host_peak_rss_gib()
    args = (cell.params, cell.state, queries[0])
    flops = xla_flops(spec, cell.model, cell.device, forward, args, training=False)
    return build_metrics(
        spec, cell.model, raw, [], timer="wall-clock", build_s=build_s, flops=flops
    )


def _answer(model: models.Model, compute: Any, params: Any, state: Any, batch: Any) -> jax.Array:
    """The model's output on a batch reduced by its loss, as torch's inference reduces it."""
    out, _ = forward(model, compute, params, state, batch, False)
    return model.loss(out, batch)
