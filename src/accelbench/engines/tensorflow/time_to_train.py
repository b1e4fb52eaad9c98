"""The time-to-train scenario under TensorFlow: the train scenario's tf.function step
(train.training_step) on real data until a held-out metric reaches its target, run as torch's
and JAX's runs are (scenarios/time_to_train/measure.to_target), so that the frameworks' times to
the same target on the same records compare like with like.

The records are the torch workload's of the same name (execution.data.split_loaders: what it
reads, how it prepares them, its held-out split), each batch as numpy arrays, images channels
last as the Keras models take them; a classifier's targets are its labels, the autoencoder's its
images. After each epoch the held-out split is evaluated by a tf.function forward pass on a
clock of its own. FLOPs are not counted (train.py says why). One process."""

from __future__ import annotations

import time
from typing import Any

from accelbench.engines.tensorflow import models
from accelbench.engines.tensorflow.train import (
    Losses,
    _optimizer,
    built,
    keras_batch,
    training_step,
)
from accelbench.execution.data import endless, split_loaders
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
    classifier = records.correct is not None
    start = time.perf_counter()
    tf, device, chosen = built(spec)
    import keras

    with tf.device(device.name):
        model, loss_fn = chosen.build(), chosen.loss()
        step = training_step(tf, model, loss_fn, _optimizer(spec, keras))

        @tf.function
        def evaluated(x: Any, y: Any) -> tuple[Any, Any]:
            out = model(x, training=False)
            loss = tf.cast(loss_fn(y, out), tf.float32) * tf.cast(tf.shape(x)[0], tf.float32)
            if not classifier:
                return loss, tf.zeros(())
            labelled = tf.argmax(out, -1, output_type=tf.int32) == tf.cast(y, tf.int32)
            return loss, tf.reduce_sum(tf.cast(labelled, tf.float32))

        train_loader, held_out = split_loaders(records, spec, pin_memory=False)
        batches = (keras_batch(b, classifier) for b in endless(train_loader))
        num_train = len(train_loader.dataset)  # type: ignore[arg-type]
        build_s = time.perf_counter() - start

        def evaluate() -> tuple[float, float | None]:
            def summed(batch: Any) -> tuple[Any, Any]:
                return evaluated(*keras_batch(batch, classifier))

            return held_out_mean(held_out, summed, classifier)

        timer, raw = device.timer(), Raw()

        losses = Losses(step, device)

        def epoch() -> None:
            lagged_epoch(spec, timer, raw, batches, losses.step)
            raw.step_loss += losses.read()

        run = to_target(spec, device, raw, epoch, evaluate, num_train)
    raw.peak_allocated, raw.peak_reserved = device.peak_memory_gib()
    raw.host_rss = host_peak_rss_gib()
    metrics = build_metrics(
        spec, chosen, raw, [], timer=timer.method, build_s=build_s, flops=None, metered_from_epoch=0
    )
    items = (num_train, len(held_out.dataset))  # type: ignore[arg-type]
    record = run_record(spec, run.ended, run.curve, raw.step_loss, run.eval_s, items)
    return metrics.model_copy(
        update={"record": record, "trainable_params": models.trainable(model)}
    )
