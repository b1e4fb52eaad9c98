"""The generate scenario under JAX, as torch's (scenarios/generate/measure.py): greedy decoding
of spec.new_tokens tokens for a batch of spec.prompt_tokens random ids, every token timed as it
reaches the host. A step is one generation: a jitted prefill that fills a key-value cache of
every position the generation reaches and makes the first token, then a jitted call a token, each
token copied to the host as it is made (one synchronisation a token, as a streaming server has,
and as torch's streamer waits). The weights are cast to the compute dtype once, as torch's
model is moved to its dtype before timing. Epoch 1 holds tracing and XLA's compilation of both
programs."""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from accelbench.engines.jax import decoder
from accelbench.engines.jax.train import built
from accelbench.execution.device import host_peak_rss_gib
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, first_steady_step, measured_epochs
from accelbench.scenarios.generate.measure import generation
from accelbench.scenarios.settings import Prompts


def measure(spec: RunSpec) -> Metrics:
    own = Prompts.of(spec)
    start = time.perf_counter()
    cell = built(spec)
    c = decoder.config(spec.workload)
    params = jax.tree.map(lambda a: a.astype(cell.compute), cell.params)
    cell = dataclasses.replace(cell, params=None)  # the weights held once: in the compute dtype
    positions = own.prompt_tokens + own.new_tokens - 1  # the last token is made, not read
    prefill = jax.jit(partial(_prefill, c, positions))
    step = jax.jit(partial(_next, c), donate_argnums=(2,))  # the cache is updated in place
    rng = np.random.default_rng(spec.seed)
    shape = (spec.batch_size, own.prompt_tokens)
    prompts = cell.device.put(rng.integers(0, c.vocab, shape, dtype=np.int32))
    # Generation computes no loss: each step's is the model's on its prompts, taken once.
    prompt_loss = float(jax.jit(partial(_loss, c))(params, prompts))
    build_s = time.perf_counter() - start

    raw, token_ms = Raw(), []
    for _ in measured_epochs(spec, cell.device, raw):
        for _ in range(spec.steps_per_epoch):
            sent = time.perf_counter()
            token, cache = prefill(params, prompts)
            marks = [_streamed(token)]
            for made in range(1, own.new_tokens):
                token, cache = step(params, token, cache, own.prompt_tokens + made - 1)
                marks.append(_streamed(token))
            raw.step_ms.append((marks[-1] - sent) * 1e3)
            token_ms.append([(mark - sent) * 1e3 for mark in marks])
    raw.step_loss = [prompt_loss] * len(raw.step_ms)
    raw.wait_ms = [0.0] * len(raw.step_ms)  # the prompts are on the device
    raw.peak_allocated, raw.peak_reserved = cell.device.peak_memory_gib()
    raw.host_rss = host_peak_rss_gib()
    metrics = build_metrics(
        spec, cell.model, raw, [], timer="wall-clock", build_s=build_s, flops=None
    )
    steady = token_ms[first_steady_step(spec, raw.step_ms) :]
    return metrics.model_copy(
        update={"tokens_per_item": own.new_tokens, "record": generation(spec, steady, token_ms)}
    )


def _streamed(token: jax.Array) -> float:
    """When the token reached the host (the copy waits for it)."""
    np.asarray(token)
    return time.perf_counter()


def _prefill(
    c: decoder.Config, positions: int, params: Any, prompts: jax.Array
) -> tuple[jax.Array, decoder.Cache]:
    """The first new token of each prompt, greedy, and the cache the prompts filled."""
    dtype = params["embed"].dtype
    cache = decoder.empty_cache(c, prompts.shape[0], positions, dtype)
    out, cache = decoder.decoded(c, params, prompts, cache)
    return jnp.argmax(out[:, -1], -1).astype(jnp.int32), cache


def _next(
    c: decoder.Config, params: Any, token: jax.Array, cache: decoder.Cache, position: jax.Array
) -> tuple[jax.Array, decoder.Cache]:
    """The token after `token`, which is at `position`, greedy, and the cache with it."""
    out, cache = decoder.decoded(c, params, token[:, None], cache, position)
    return jnp.argmax(out[:, -1], -1).astype(jnp.int32), cache


def _loss(c: decoder.Config, params: Any, prompts: jax.Array) -> jax.Array:
    return decoder.next_token_loss(decoder.logits(c, params, prompts), {"x": prompts})
