"""The inference scenario under TensorFlow, as torch's (scenarios/infer/measure.py): forward
passes of one host batch at a time through a tf.function, each timed to its answer (read back),
so each step time is that batch's latency and the throughput is items over the time from one
answer to the next. Epoch 1 holds tracing the graph."""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np

from accelbench.engines.tensorflow.train import built, host_batches
from accelbench.execution.device import host_peak_rss_gib
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, measured_epochs

NUM_QUERIES = 8
"""Distinct host batches (the records of --data, or made) taken before timing and sent in
turn, as torch's inference sends."""


def measure(spec: RunSpec) -> Metrics:
    start = time.perf_counter()
    tf, device, chosen = built(spec)
    rng = np.random.default_rng(spec.seed)
    queries = list(itertools.islice(host_batches(spec, chosen, rng), NUM_QUERIES))
    with tf.device(device.name):
        model, loss_fn = chosen.build(), chosen.loss()

        @tf.function
        def answer(x: Any, y: Any) -> Any:
            """The output reduced by the loss, as torch's inference reduces it."""
            return tf.cast(loss_fn(y, model(x, training=False)), tf.float32)

        if spec.inputs_on_device:
            queries = [tuple(tf.constant(a) for a in q) for q in queries]
        build_s = time.perf_counter() - start
        raw = Raw()
        for _ in measured_epochs(spec, device, raw):
            answered = time.perf_counter()
            for x, y in itertools.islice(itertools.cycle(queries), spec.steps_per_epoch):
                sent = time.perf_counter()
                raw.step_loss.append(float(answer(x, y).numpy()))
                now = time.perf_counter()  # answered: the result is read back
                raw.step_ms.append((now - sent) * 1e3)
                raw.cycle_ms.append((now - answered) * 1e3)
                answered = now
    raw.wait_ms = [0.0] * len(raw.step_ms)  # queries wait on the host, ready, as in LoadGen
    raw.peak_allocated, raw.peak_reserved = device.peak_memory_gib()
    raw.host_rss = host_peak_rss_gib()
    return build_metrics(spec, chosen, raw, [], timer="wall-clock", build_s=build_s, flops=None)
