"""The train scenario under TensorFlow: a tf.function step (the loss's gradient by a
GradientTape, Keras' optimizer applying it) over synthetic host batches made for each step as
torch's are (or a few kept on the device, with --inputs-on-device), timed by the lagged timer
(each mark waits for the step before) and measured by the shared kit: first epoch apart (tracing
the graph), steady rate and interval, divergence, energy and host activity. FLOPs are not
counted: TensorFlow has no counter of a step's kernels but its profiler of graphs, which
counts differently from both torch's counter and XLA's."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from accelbench import workloads
from accelbench.engines import LaggedDevice
from accelbench.engines.tensorflow import models
from accelbench.execution import distributed
from accelbench.execution.data import as_numpy, endless, make_loader
from accelbench.execution.device import host_peak_rss_gib
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, across_ranks, build_metrics, lagged_epochs
from accelbench.workload import Batch

DEVICE_BATCHES = 4
"""Distinct batches cycled with inputs_on_device, as torch's train scenario cycles them."""


class TensorFlowDevice(LaggedDevice):
    """TensorFlow's CPU or its first GPU ("cuda"); a step is waited for by reading its loss."""

    def __init__(self, device_type: str) -> None:
        self.type = device_type
        self.index = 0 if device_type == "cuda" else None
        self.name = "/GPU:0" if device_type == "cuda" else "/CPU:0"

    def wait(self, output: Any) -> None:
        output.numpy()

    def done(self, output: Any) -> bool:
        """On a CPU a tf.function runs as it is called (its first step after tracing took two
        steps' time under the lagged marks, and its last none); a GPU's kernels are queued."""
        return self.type == "cpu"

    def reset_peak_memory(self) -> None:
        if self.type == "cuda":
            import tensorflow as tf

            tf.config.experimental.reset_memory_stats("GPU:0")

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        if self.type != "cuda":
            return None, None
        import tensorflow as tf

        return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30, None


def built(spec: RunSpec) -> tuple[Any, TensorFlowDevice, models.Model]:
    """tensorflow, the cell's device and its model's recipe, the seed and the precision policy
    set (build the model under `placed(tf, device)`)."""
    tf, keras = _imported()
    if spec.replicas > 1:
        _join(spec, tf)
    keras.utils.set_random_seed(spec.seed)
    keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if spec.precision == "amp-bf16" else "float32"
    )
    return tf, TensorFlowDevice(spec.device), models.get(spec.workload, spec.model_args)


def measure(spec: RunSpec) -> Metrics:
    start = time.perf_counter()
    tf, device, chosen = built(spec)
    import keras

    with placed(tf, device):
        model, loss_fn = chosen.build(), chosen.loss()
        optimizer = _optimizer(spec, keras)
        step = training_step(tf, model, loss_fn, optimizer)
        rng = np.random.default_rng(spec.seed + distributed.rank_index())  # its own data
        queued = batches(spec, chosen, rng, tf)
        build_s = time.perf_counter() - start
        raw, losses = Raw(), Losses(step, device)
        method = lagged_epochs(spec, device, raw, queued, losses.step, losses.read)
    raw.peak_allocated, raw.peak_reserved = device.peak_memory_gib()
    weights = [*model.weights, *optimizer.variables]
    raw.state_gib = sum(int(np.prod(w.shape)) * tf.as_dtype(w.dtype).size for w in weights) / 2**30
    raw.host_rss = host_peak_rss_gib()
    raw, ranks = across_ranks(spec, raw)  # the workers' records, over torch's gloo group
    metrics = build_metrics(spec, chosen, raw, ranks, timer=method, build_s=build_s, flops=None)
    return metrics.model_copy(update={"trainable_params": models.trainable(model)})


def placed(tf: Any, device: TensorFlowDevice) -> Any:
    """Where a cell's model, optimizer and step are made: the multi-worker strategy's scope
    when the cell has replicas (their variables mirrored, their gradients all-reduced), else
    its device."""
    if tf.distribute.has_strategy():
        return tf.distribute.get_strategy().scope()
    return tf.device(device.name)


def training_step(tf: Any, model: Any, loss_fn: Any, optimizer: Any) -> Any:
    """One optimizer step as a tf.function of (inputs, targets), returning its loss: the loss's
    gradient by a GradientTape, the optimizer (built here) applying it. Made under a
    multi-worker strategy's scope, each worker's replica steps on its own batch: a Keras loss
    is then already its replica's share (divided by the replicas in sync, as Keras' own
    trainer relies on) and the optimizer sums the replicas' gradients, so the step follows
    their mean, as DDP's does; the loss returned is the sum of the shares, their mean."""
    optimizer.build(model.trainable_variables)

    def replica_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.cast(loss_fn(y, model(x, training=True)), tf.float32)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    if not tf.distribute.has_strategy():
        return tf.function(replica_step)
    strategy = tf.distribute.get_strategy()

    @tf.function
    def step(x: Any, y: Any) -> Any:
        shares = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, shares, axis=None)

    return step


class Losses:
    """A tf.function step's losses: on a CPU, which has run the step when it returns, each read
    as a number then (a tensor held until the epochs end costs 1 KB of host memory, which the
    record's peak counts); on a GPU, whose steps are queued, each tensor kept until read."""

    def __init__(self, step: Any, device: TensorFlowDevice) -> None:
        self._step, self._device = step, device
        self._held: list[Any] = []

    def step(self, batch: tuple[Any, Any]) -> Any:
        loss = self._step(*batch)
        self._held.append(float(loss) if self._device.done(loss) else loss)
        return loss

    def read(self) -> list[float]:
        """The losses of the steps since the last read."""
        held, self._held = self._held, []
        return [float(x) for x in held]


def _join(spec: RunSpec, tf: Any) -> None:
    """Join the other replicas as TensorFlow's workers under a MultiWorkerMirroredStrategy
    (before any op runs, as TensorFlow requires): each takes a free port on its host and the
    workers' addresses are exchanged over torch's gloo group, which the cell has joined; the
    strategy is entered for the rest of the process (the cell's)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    workers = distributed.gather(f"{socket.getfqdn()}:{port}")
    if spec.device == "cuda":  # a GPU a worker, as torch's replicas have
        gpus = tf.config.list_physical_devices("GPU")
        tf.config.set_visible_devices(gpus[distributed.local_index()], "GPU")
    index = distributed.rank_index()
    os.environ["TF_CONFIG"] = json.dumps(
        {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING
            if spec.device == "cpu"
            else tf.distribute.experimental.CommunicationImplementation.NCCL
        )
    )
    tf.distribute.experimental_set_strategy(strategy)


def _imported() -> tuple[Any, Any]:
    """tensorflow and keras, imported quietly, with the threads the cell was given (torch's,
    set by the cell from --threads or the host's free CPUs) before any op runs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import torch

    # Triton, which torch._dynamo imports (torchvision's ops do, reading --data), crashes the
    # process if it is imported after TensorFlow: imported first (the cell server has already).
    importlib.import_module("torch._dynamo")
    import keras
    import tensorflow as tf

    threads = torch.get_num_threads()
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(threads, 2))
    return tf, keras


def _optimizer(spec: RunSpec, keras: Any) -> Any:
    """torch's: SGD with momentum 0.9, or AdamW with torch's weight decay (0.01), at the scaled
    learning rate after the same linear warm-up."""

    warmup = spec.warmup_steps
    rate: Any = spec.scaled_lr
    if warmup:

        class Warmup(keras.optimizers.schedules.LearningRateSchedule):
            def __call__(self, count: Any) -> Any:
                return spec.scaled_lr * keras.ops.minimum(1.0, (count + 1) / warmup)

        rate = Warmup()
    if spec.optimizer == "adamw":
        return keras.optimizers.AdamW(rate, weight_decay=0.01)
    return keras.optimizers.SGD(rate, momentum=0.9)


def batches(
    spec: RunSpec, model: models.Model, rng: np.random.Generator, tf: Any
) -> Iterator[tuple[Any, Any]]:
    """Host batches for each step (host_batches); with inputs_on_device a few made tensors on
    the device once and cycled."""
    host = host_batches(spec, model, rng)
    if spec.inputs_on_device:
        pool = [tuple(tf.constant(a) for a in next(host)) for _ in range(DEVICE_BATCHES)]
        return itertools.cycle(pool)
    return host


def host_batches(
    spec: RunSpec, model: models.Model, rng: np.random.Generator
) -> Iterator[tuple[Any, Any]]:
    """The torch workload's records (--data) or synthetic batches made for each step as
    torch's are (inference takes its queries from these too)."""
    if spec.data is None:
        return (model.sample(rng, spec.batch_size) for _ in itertools.count())
    records = workloads.get(spec.workload, spec.model_args)
    loader = make_loader(records, spec, pin_memory=False, rank=distributed.rank_index())
    return (keras_batch(b, records.correct is not None) for b in endless(loader))


def keras_batch(batch: Batch, classifier: bool) -> tuple[np.ndarray, np.ndarray]:
    """A torch workload's batch as a Keras model's (inputs, targets): images channels last; a
    classifier's targets its labels, another's (the autoencoder's) its inputs."""
    found = as_numpy(batch)
    x = found["x"].transpose(0, 2, 3, 1) if found["x"].ndim == 4 else found["x"]  # NCHW -> NHWC
    return x, (found["label"] if classifier else x)
