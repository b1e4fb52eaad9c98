"""The train scenario under JAX: a jitted step (forward, backward and optax's update, its
buffers donated) over synthetic host batches made as torch's are (or a few kept on the device,
with --inputs-on-device), timed by the lagged timer and measured by the shared kit, so its
record is every training cell's: first epoch apart, steady rate and interval, divergence,
energy, host activity, and FLOPs from XLA's cost analysis of the step. A device running out of
memory is an oom result, as torch's is (XLA's RESOURCE_EXHAUSTED says "Out of memory")."""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from accelbench import workloads
from accelbench.engines.jax import models
from accelbench.engines.jax.device import JaxDevice
from accelbench.errors import one_line
from accelbench.execution import efficiency
from accelbench.execution.data import as_numpy, endless, make_loader
from accelbench.execution.device import host_peak_rss_gib
from accelbench.records.metrics import NO_CPU_PEAK, Flops, Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, across_ranks, build_metrics, lagged_epochs

log = logging.getLogger(__name__)

DEVICE_BATCHES = 4
"""Distinct batches cycled with inputs_on_device, as torch's train scenario cycles them."""


@dataclass(frozen=True)
class Built:
    """A cell's model on its device: what training and inference both start from."""

    device: JaxDevice
    model: models.Model
    params: Any
    """In bf16 under bf16 precision, else fp32."""
    state: Any
    compute: Any
    """The dtype the passes compute in: bf16 under bf16 and amp-bf16."""


def built(spec: RunSpec) -> Built:
    """The cell's model built and put on its device, in the spec's precision."""
    _fit_threads(spec)
    _join(spec)
    device = JaxDevice(spec.device, spec.replicas)
    model = models.get(spec.workload, spec.model_args)
    params, state = model.init(jax.random.key(spec.seed))
    dtype = jnp.bfloat16 if spec.precision == "bf16" else jnp.float32
    params = device.put(jax.tree.map(lambda a: a.astype(dtype), params))
    compute = jnp.bfloat16 if spec.precision in ("bf16", "amp-bf16") else jnp.float32
    return Built(device, model, params, device.put(state), compute)


def measure(spec: RunSpec) -> Metrics:
    try:
        return _measured(spec)
    finally:
        if spec.replicas > 1:
            jax.distributed.shutdown()


def _measured(spec: RunSpec) -> Metrics:
    start = time.perf_counter()
    cell = built(spec)
    device, model, params, state = cell.device, cell.model, cell.params, cell.state
    optimizer = _optimizer(spec)
    opt_state = device.put(optimizer.init(params))
    log = LossLog(device)
    step = log.jitted(partial(_step, model, optimizer, cell.compute))
    rng = np.random.default_rng(spec.seed + jax.process_index())  # each replica its own data
    batches = _batches(spec, model, rng, device)
    build_s = time.perf_counter() - start

    carry = [params, opt_state, state]  # the step's donated buffers, replaced each step

    raw = Raw()
    method = lagged_epochs(spec, device, raw, batches, partial(log.step, step, carry), log.read)
    params, opt_state, state = carry
    raw.peak_allocated, raw.peak_reserved = device.peak_memory_gib()
    raw.state_gib = sum(a.nbytes for a in jax.tree.leaves((params, opt_state, state))) / 2**30
    raw.host_rss = host_peak_rss_gib()
    flops = xla_flops(
        spec, model, device, step, log.args((params, opt_state, state), next(batches))
    )
    raw, ranks = across_ranks(spec, raw)  # the replicas' records, over torch's gloo group
    return build_metrics(
        spec, model, raw, ranks, timer=method, build_s=build_s, flops=flops
    ).model_copy(update={"trainable_params": models.num_params(params)})


def _step(
    model: models.Model,
    optimizer: Any,
    compute: Any,
    params: Any,
    opt_state: Any,
    state: Any,
    batch: dict[str, jax.Array],
) -> tuple[Any, Any, Any, jax.Array]:
    """One optimizer step: the loss's gradient in the compute dtype (amp-bf16: bf16 copies of
    fp32 weights, as autocast computes), then the update."""
    import optax

    def loss_of(p: Any) -> tuple[jax.Array, Any]:
        out, new_state = forward(model, compute, p, state, batch, True)
        return model.loss(out, batch), new_state

    (loss, new_state), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, new_state, loss


def forward(
    model: models.Model, compute: Any, params: Any, state: Any, batch: Any, training: bool
) -> tuple[jax.Array, Any]:
    """The model's output on a batch and its state after, in the compute dtype (amp-bf16: bf16
    copies of fp32 weights, as autocast computes): images and features cast, token ids as
    they are."""
    params = jax.tree.map(lambda a: a.astype(compute), params)
    x = batch["x"]
    x = x.astype(compute) if jnp.issubdtype(x.dtype, jnp.floating) else x
    return model.apply(params, state, x, training)


def _optimizer(spec: RunSpec) -> Any:
    """torch's: SGD with momentum 0.9, or AdamW with torch's weight decay (0.01), at the scaled
    learning rate, after the same linear warm-up."""
    import optax

    warmup = spec.warmup_steps

    def lr(count: jax.Array) -> jax.Array:
        ramp = jnp.minimum(1.0, (count + 1) / warmup) if warmup else jnp.ones(())
        return spec.scaled_lr * ramp

    if spec.optimizer == "adamw":
        return optax.adamw(lr, weight_decay=0.01)
    return optax.sgd(lr, momentum=0.9)


def _batches(
    spec: RunSpec, model: models.Model, rng: np.random.Generator, device: JaxDevice
) -> Iterator[dict[str, Any]]:
    """Host batches for each step (the jitted step copies them over), or with inputs_on_device
    a few put on the device once and cycled."""
    host = host_batches(spec, model, rng)
    if spec.inputs_on_device:
        pool = [device.shard(device.put(next(host))) for _ in range(DEVICE_BATCHES)]
        return itertools.cycle(pool)
    return host if device.mesh is None else map(device.shard, host)  # one replica's: as made


def host_batches(
    spec: RunSpec, model: models.Model, rng: np.random.Generator
) -> Iterator[dict[str, Any]]:
    """The torch workload's records (--data), each replica its own draw, or synthetic batches
    made for each step as torch's are (inference takes its queries from these too)."""
    if spec.data is None:
        return (model.sample(rng, spec.batch_size) for _ in itertools.count())
    records = workloads.get(spec.workload, spec.model_args)
    loader = make_loader(records, spec, pin_memory=False, rank=jax.process_index())
    return map(as_numpy, endless(loader))


def xla_flops(
    spec: RunSpec,
    model: models.Model,
    device: JaxDevice,
    step: Any,
    args: tuple[Any, ...],
    training: bool = True,
) -> Flops | None:
    """FLOPs of one item's pass from XLA's cost analysis of the jitted pass as traced (training:
    forward, backward and the optimizer's update; elementwise work included, which torch's
    counter leaves out); read from the lowered pass, since compiling it again would cost as long
    as the first step did."""
    try:
        cost = step.lower(*args).cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        per_step = float(cost["flops"])
    except Exception as exc:  # a backend without a cost model must not cost the measurement
        log.warning("XLA's FLOPs not read: %s", one_line(exc))
        return None
    if per_step <= 0:
        return None
    peak: tuple[float | None, str] = (None, NO_CPU_PEAK)
    if device.type != "cpu":
        name = device.device.device_kind  # the name torch gives it too
        peak = efficiency.datasheet_peak(name, spec.precision) or (None, f"no datasheet for {name}")
    formula = model.analytic_flops
    return Flops(
        per_item=per_step / spec.global_batch,  # the step's program is the global batch's
        analytic_per_item=formula(training) if formula else None,
        peak_per_s=peak[0],
        peak_source=peak[1],
        num_devices=spec.num_processes,
    )


def _join(spec: RunSpec) -> None:
    """With replicas, join the others as jax.distributed's processes (on CPUs their collectives
    are gloo's), coordinated beside the port torchrun gave this cell."""
    if spec.replicas == 1:
        return
    if spec.device == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    local = int(os.environ["LOCAL_RANK"])
    jax.distributed.initialize(
        coordinator_address=f"{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT']) + 1}",
        num_processes=int(os.environ["WORLD_SIZE"]),
        process_id=int(os.environ["RANK"]),
        local_device_ids=None if spec.device == "cpu" else [local],  # a GPU a replica
    )


LOG_STEPS = 1024
"""The losses a LossLog holds before it is put aside for a fresh one (4 KB in fp32)."""


class LossLog:
    """Each step's loss written on the device by the step itself, as torch's train scenario
    writes into a tensor, and read back once: no step's loss is held as an array of its own
    (each held 2 KB of host memory until the epochs ended: 90,000 steps of tiny_mlp added
    0.39 GiB to the peak resident memory the record gives). The step rolls a log of the last
    `size` losses along, newest last, which is put aside when full and a fresh one put in its
    place. An index to write at would be one more argument and one more output of every step,
    each a dispatch cost (0.85 us on this host's CPU); rolling 4 KB costs less: tiny_mlp's
    50 us step, in chunks alternated in one process, took 1.6 us less at the least of 150 and
    2.7-2.9 us less at their median."""

    def __init__(self, device: JaxDevice, size: int = LOG_STEPS) -> None:
        self.size, self.device = size, device
        self._full: list[jax.Array] = []  # the logs put aside, each of `size` losses
        self._log: jax.Array
        self._taken: int
        self._fresh()

    def jitted(self, step: Any) -> Any:
        """`step(params, opt_state, state, batch) -> (params, opt_state, state, loss)`,
        jitted to take the log after its state and to roll its loss into it, its buffers and
        the log donated."""

        def logged(params: Any, opt_state: Any, state: Any, log: Any, batch: Any) -> Any:
            params, opt_state, state, loss = step(params, opt_state, state, batch)
            return (
                params,
                opt_state,
                state,
                jnp.roll(log, -1).at[-1].set(loss.astype(log.dtype)),
                loss,
            )

        return jax.jit(logged, donate_argnums=(0, 1, 2, 3))

    def args(self, carry: Sequence[Any], batch: Any) -> tuple[Any, ...]:
        """The jitted step's arguments: the carry (params, opt_state, state), the log, the
        batch."""
        return *carry, self._log, batch

    def step(self, jitted: Any, carry: list[Any], batch: Any) -> jax.Array:
        """One step dispatched: `carry` (params, opt_state, state, their buffers donated)
        replaced by the step's; returns its loss, which is in the log too (and, not donated,
        what a timer may wait for)."""
        carry[0], carry[1], carry[2], self._log, loss = jitted(*carry, self._log, batch)
        self._taken += 1
        if self._taken == self.size:
            self._full.append(self._log)
            self._fresh()
        return loss

    def read(self) -> list[float]:
        """The losses of the steps since the last read, in order, in one transfer a log; a
        replica reads its copy (every replica holds the global loss, which no process may read
        whole)."""
        logs = [(log, self.size) for log in self._full]
        self._full = []
        if self._taken:  # the steps since the last full log: the newest of this one
            logs.append((self._log, self._taken))
            self._fresh()
        return [float(x) for log, n in logs for x in np.asarray(log.addressable_data(0))[-n:]]

    def _fresh(self) -> None:
        self._log = self.device.put(jnp.zeros(self.size, jnp.float32))
        self._taken = 0


def _fit_threads(spec: RunSpec) -> None:
    """XLA's CPU client sizes its thread pool by the CPUs this process may run on: hold it to
    the threads the cell was given (torch's, set by the cell from --threads or the host's free
    CPUs) by running on that many of the least busy CPUs; a replica on its own share of them,
    by its local rank."""
    import psutil
    import torch

    allowed = sorted(os.sched_getaffinity(0))
    threads = torch.get_num_threads()
    if threads >= len(allowed):
        return
    if spec.replicas > 1:  # each its own, in order: replicas sampling the load could collide
        first = int(os.environ.get("LOCAL_RANK", "0")) * threads
        if first + threads <= len(allowed):  # else more replicas' threads than CPUs: share
            os.sched_setaffinity(0, allowed[first : first + threads])
        return
    busy = psutil.cpu_percent(interval=0.1, percpu=True)
    quiet = sorted(allowed, key=lambda cpu: busy[cpu] if cpu < len(busy) else 0.0)
    os.sched_setaffinity(0, quiet[:threads])
