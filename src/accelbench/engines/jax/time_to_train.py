"""The time-to-train scenario under JAX: the jitted step of the train scenario (train.py) on real
data until a held-out metric reaches its target, as torch's time-to-train runs
(scenarios/time_to_train/measure.py), so that the two frameworks' times to the same target on
the same records compare like with like.

The records are the torch workload's of the same name (what it reads, how it prepares them, its
held-out split: execution.data.split_loaders), each batch copied to the device as numpy arrays.
Training runs in epochs of spec.steps_per_epoch steps timed by the lagged timer; after each, the
epoch's losses are read back and the held-out split is evaluated by a jitted forward pass on a
clock of its own, so the training clock holds optimizer steps only. The run ends as torch's
does (measure.outcome): the target reached, a diverged loss, or the budget spent. One process."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from accelbench.engines.jax import models
from accelbench.engines.jax.train import (
    LossLog,
    _optimizer,
    _step,
    built,
    forward,
    xla_flops,
)
from accelbench.execution.data import as_numpy, endless, split_loaders
from accelbench.execution.device import host_peak_rss_gib
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, lagged_epoch
from accelbench.scenarios.time_to_train.measure import (
    held_out_mean,
    readable,
    run_record,
    to_target,
)


def measure(spec: RunSpec) -> Metrics:
    records = readable(spec)
    start = time.perf_counter()
    cell = built(spec)
    device, model = cell.device, cell.model
    optimizer = _optimizer(spec)
    carry = [cell.params, device.put(optimizer.init(cell.params)), cell.state]
    log = LossLog(device)
    step = log.jitted(partial(_step, model, optimizer, cell.compute))
    evaluated = jax.jit(partial(_evaluated, model, cell.compute, records.correct is not None))
    train_loader, held_out = split_loaders(records, spec, pin_memory=False)
    batches = (device.shard(as_numpy(b)) for b in endless(train_loader))
    num_train = len(train_loader.dataset)  # type: ignore[arg-type]
    build_s = time.perf_counter() - start

    one = partial(log.step, step, carry)

    def evaluate() -> tuple[float, float | None]:
        params, _, state = carry

        def summed(batch: Any) -> tuple[jax.Array, jax.Array]:
            return evaluated(params, state, device.put(as_numpy(batch)))

        return held_out_mean(held_out, summed, records.correct is not None)

    timer, raw = device.timer(), Raw()

    def epoch() -> None:
        lagged_epoch(spec, timer, raw, batches, one)
        raw.step_loss += log.read()

    run = to_target(spec, device, raw, epoch, evaluate, num_train)
    raw.peak_allocated, raw.peak_reserved = device.peak_memory_gib()
    raw.state_gib = sum(a.nbytes for a in jax.tree.leaves(carry)) / 2**30
    raw.host_rss = host_peak_rss_gib()
    flops = xla_flops(spec, model, device, step, log.args(carry, next(batches)))
    metrics = build_metrics(
        spec, model, raw, [], timer=timer.method, build_s=build_s, flops=flops, metered_from_epoch=0
    )
    num_held_out = len(held_out.dataset)  # type: ignore[arg-type]
    items = (num_train, num_held_out)
    record = run_record(spec, run.ended, run.curve, raw.step_loss, run.eval_s, items)
    return metrics.model_copy(
        update={"record": record, "trainable_params": models.num_params(carry[0])}
    )


def _evaluated(
    model: models.Model, compute: Any, classifier: bool, params: Any, state: Any, batch: Any
) -> tuple[jax.Array, jax.Array]:
    """A held-out batch's summed loss and, for a classifier, how many it labels right (its
    largest logit), in the compute dtype as training runs, the model in eval mode."""
    out, _ = forward(model, compute, params, state, batch, False)
    n = batch["x"].shape[0]
    right = jnp.sum(jnp.argmax(out, -1) == batch["label"]) if classifier else jnp.zeros(())
    return model.loss(out, batch).astype(jnp.float32) * n, right
