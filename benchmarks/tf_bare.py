"""What the TensorFlow engine costs: accelbench's TensorFlow training cell against a bare loop.

Both build the same Keras model (accelbench.engines.tensorflow.models), optimizer (Keras' SGD,
momentum 0.9) and host batches (numpy, made for each step), trace the same tf.function step
(engines.tensorflow.train.training_step), and time a steady epoch
after a warm-up epoch that holds the tracing, in this process, alternating round by round
(ABBA) after one unrecorded round of each. The bare loop waits for the device once at each end
of its epoch (its last loss read back); accelbench's timer waits for a step's predecessor at
each step of the first epoch, then once a stride of 20 ms. Printed: each round's rates, the
median paired ratio accelbench / bare (1.00: no cost) and its range.

    python benchmarks/tf_bare.py --workload autoencoder --batch-size 32
    python benchmarks/tf_bare.py --quick    # seconds: what the test suite runs
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np
from _options import paired_ratios, parse, parser, print_ratios  # benchmarks/, beside this script
from _options import spec as cell_of

from accelbench.engines.tensorflow import train as tf_train
from accelbench.records.spec import RunSpec


def accelbench_rate(spec: RunSpec) -> float:
    """accelbench's headline: the steady state's items over its seconds."""
    return tf_train.measure(spec).items_per_s


def bare_rate(spec: RunSpec) -> float:
    """The loop a person would write by hand: trace the step, run epochs, wait at their ends."""
    tf, device, chosen = tf_train.built(spec)
    import keras

    with tf.device(device.name):
        model, loss_fn = chosen.build(), chosen.loss()
        optimizer = tf_train._optimizer(spec, keras)
        step = tf_train.training_step(tf, model, loss_fn, optimizer)
        rng = np.random.default_rng(spec.seed)
        seconds = 0.0
        for _ in range(spec.epochs):
            start = time.perf_counter()
            for _ in range(spec.steps_per_epoch):
                loss = step(*chosen.sample(rng, spec.batch_size))
            loss.numpy()
            seconds = time.perf_counter() - start  # the last epoch, as for accelbench
    return spec.steps_per_epoch * spec.batch_size / seconds


def main() -> None:
    # 20 steps of LeNet-5 (60 ms) put single rounds 0.91 to 1.31 apart here: 200 steps.
    options = parser(__doc__, "lenet5", 32, steps=200, rounds=8)
    args, device = parse(options)
    spec = cell_of(args, device, framework="tensorflow")
    ratios = paired_ratios(
        partial(accelbench_rate, spec), partial(bare_rate, spec), args.rounds, "tensorflow"
    )
    print_ratios(f"{args.workload} bs={args.batch_size} fp32 tensorflow on {device.type}", ratios)


if __name__ == "__main__":
    main()
