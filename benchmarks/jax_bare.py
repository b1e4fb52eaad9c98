"""What the JAX engine costs: accelbench's JAX training cell against a bare jitted loop.

Both build the same model (accelbench.engines.jax.models), optimizer (optax's SGD, momentum 0.9) and
host batches (numpy, made for each step), jit the same step with its buffers donated, and time a
steady epoch after a warm-up epoch that holds the compilation, in this process, alternating round by
round (ABBA) after one unrecorded round of each. The bare loop waits for the device once at each end
of its epoch; accelbench's timer waits for a step's predecessor at each step of the first epoch,
then once a stride of 20 ms. Printed: each round's rates, the median paired ratio accelbench / bare
(1.00: no cost) and its range.

    python benchmarks/jax_bare.py --workload autoencoder --batch-size 32
    python benchmarks/jax_bare.py --quick    # seconds: what the test suite runs
"""

from __future__ import annotations

import time
from functools import partial

import jax
import numpy as np
from _options import paired_ratios, parse, parser, print_ratios  # benchmarks/, beside this script
from _options import spec as cell_of

from accelbench.engines.jax import models
from accelbench.engines.jax import train as jax_train
from accelbench.records.spec import RunSpec


def accelbench_rate(spec: RunSpec) -> float:
    """accelbench's headline: the steady state's items over its seconds."""
    return jax_train.measure(spec).items_per_s


def bare_rate(spec: RunSpec) -> float:
    """The loop a person would write by hand: jit the step, run epochs, wait at their ends."""
    model = models.MODELS[spec.workload]()
    params, state = model.init(jax.random.key(spec.seed))
    optimizer = jax_train._optimizer(spec)
    opt_state = optimizer.init(params)
    step = jax.jit(
        partial(jax_train._step, model, optimizer, jax.numpy.float32), donate_argnums=(0, 1, 2)
    )
    rng = np.random.default_rng(spec.seed)
    seconds = 0.0
    for _ in range(spec.epochs):
        start = time.perf_counter()
        for _ in range(spec.steps_per_epoch):
            batch = model.sample(rng, spec.batch_size)
            params, opt_state, state, loss = step(params, opt_state, state, batch)
        jax.block_until_ready((params, loss))
        seconds = time.perf_counter() - start  # the last epoch, as for accelbench
    return spec.steps_per_epoch * spec.batch_size / seconds


def main() -> None:
    options = parser(__doc__, "lenet5", 32, steps=20, rounds=4)
    args, device = parse(options)
    spec = cell_of(args, device, framework="jax")
    ratios = paired_ratios(
        partial(accelbench_rate, spec), partial(bare_rate, spec), args.rounds, "jax"
    )
    print_ratios(f"{args.workload} bs={args.batch_size} fp32 jax on {device.type}", ratios)


if __name__ == "__main__":
    main()
