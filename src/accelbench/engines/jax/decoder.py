"""A Llama-shaped decoder in plain jax.numpy, with the torch workloads' configs
(workloads/language.py: LLAMA3, transformers' LlamaConfig defaults): token embedding, blocks of
RMSNorm, grouped-query causal attention with rotary positions and a SwiGLU MLP, a final norm and
the output head (the embedding's own weights where Llama ties them), initialised as transformers
initialises (normal, 0.02). Its parameters equal LlamaForCausalLM's (a test)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from accelbench.workloads.language import LLAMA3, LLAMA3_VOCAB, LLAMA_SEQ_LEN

RMS_EPS, ROPE_THETA, INIT_STD = 1e-6, 10000.0, 0.02  # LlamaConfig's defaults


@dataclass(frozen=True)
class Config:
    hidden: int
    mlp: int
    heads: int
    kv_heads: int
    tied: bool
    layers: int
    seq_len: int
    vocab: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def config(name: str) -> Config:
    """A Llama workload's shape, as workloads/language.py's function of that name builds it."""
    size, seq_len, layers, vocab = {
        "llama3_tiny": ("tiny", 64, 2, 512),
        "llama3_2_1b": ("1b", LLAMA_SEQ_LEN, 16, LLAMA3_VOCAB),
        "llama3_2_3b": ("3b", LLAMA_SEQ_LEN, 28, LLAMA3_VOCAB),
        "llama3_1_8b": ("8b", LLAMA_SEQ_LEN, 32, LLAMA3_VOCAB),
    }[name]
    return Config(*LLAMA3[size], layers=layers, seq_len=seq_len, vocab=vocab)


def init(c: Config, key: jax.Array) -> dict[str, Any]:
    keys = iter(jax.random.split(key, 4 + 7 * c.layers))

    def normal(*shape: int) -> jax.Array:
        return INIT_STD * jax.random.normal(next(keys), shape, jnp.float32)

    kv = c.kv_heads * c.head_dim
    blocks = [
        {
            "attn_norm": jnp.ones((c.hidden,)),
            "q": normal(c.hidden, c.hidden),
            "k": normal(c.hidden, kv),
            "v": normal(c.hidden, kv),
            "o": normal(c.hidden, c.hidden),
            "mlp_norm": jnp.ones((c.hidden,)),
            "gate": normal(c.hidden, c.mlp),
            "up": normal(c.hidden, c.mlp),
            "down": normal(c.mlp, c.hidden),
        }
        for _ in range(c.layers)
    ]
    params = {"embed": normal(c.vocab, c.hidden), "blocks": blocks, "norm": jnp.ones((c.hidden,))}
    return params if c.tied else params | {"head": normal(c.hidden, c.vocab)}


def _rms_norm(x: jax.Array, weight: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    scaled = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + RMS_EPS)
    return (scaled * weight.astype(jnp.float32)).astype(x.dtype)


def _rope(x: jax.Array, positions: jax.Array) -> jax.Array:
    """Rotary positions over (batch, positions, heads, head_dim) at `positions`, the halves
    rotated as transformers' rotate_half does."""
    half = x.shape[-1] // 2
    frequencies = ROPE_THETA ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions.astype(jnp.float32)[:, None] * frequencies[None, :]
    cos, sin = (jnp.concatenate([f(angles)] * 2, -1)[None, :, None, :] for f in (jnp.cos, jnp.sin))
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], -1)
    return (x * cos + rotated * sin).astype(x.dtype)


Cache = list[tuple[jax.Array, jax.Array]]
"""Each block's keys and values, (batch, the most positions, kv heads, head_dim), the positions
not yet reached zero."""


def logits(c: Config, params: dict[str, Any], ids: jax.Array) -> jax.Array:
    return decoded(c, params, ids)[0]


def decoded(
    c: Config,
    params: dict[str, Any],
    ids: jax.Array,
    cache: Cache | None = None,
    start: int | jax.Array = 0,
) -> tuple[jax.Array, Cache]:
    """The logits of `ids`, at positions from `start`; with a `cache`, each block's keys and
    values are written into it at those positions and attention reads every position up to
    each query's (a generation's prefill, then one token a call), and the cache is returned."""
    x = params["embed"][ids]
    batch, length = ids.shape
    positions = start + jnp.arange(length)
    written: Cache = []
    for i, block in enumerate(params["blocks"]):
        h = _rms_norm(x, block["attn_norm"])
        q = _rope((h @ block["q"]).reshape(batch, length, c.heads, c.head_dim), positions)
        k = _rope((h @ block["k"]).reshape(batch, length, c.kv_heads, c.head_dim), positions)
        v = (h @ block["v"]).reshape(batch, length, c.kv_heads, c.head_dim)
        if cache is None:
            attended = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        else:
            at = (0, start, 0, 0)
            keys = jax.lax.dynamic_update_slice(cache[i][0], k, at)
            values = jax.lax.dynamic_update_slice(cache[i][1], v, at)
            written.append((keys, values))
            seen = jnp.arange(keys.shape[1])[None, :] <= positions[:, None]  # (queries, keys)
            attended = jax.nn.dot_product_attention(q, keys, values, mask=seen[None, None])
        x = x + attended.reshape(batch, length, c.hidden) @ block["o"]
        h = _rms_norm(x, block["mlp_norm"])
        x = x + (jax.nn.silu(h @ block["gate"]) * (h @ block["up"])) @ block["down"]
    x = _rms_norm(x, params["norm"])
    return x @ (params["embed"].T if c.tied else params["head"]), written


def empty_cache(c: Config, batch: int, positions: int, dtype: Any) -> Cache:
    shape = (batch, positions, c.kv_heads, c.head_dim)
    return [(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(c.layers)]


def next_token_loss(out: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    """Next-token cross-entropy, each position predicting the one after it (the causal LM
    loss transformers computes from labels equal to the inputs)."""
    import optax

    ids = batch["x"]
    return optax.softmax_cross_entropy_with_integer_labels(
        out[:, :-1].astype(jnp.float32), ids[:, 1:]
    ).mean()


def sample(c: Config, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {"x": rng.integers(0, c.vocab, (n, c.seq_len), dtype=np.int32)}


def analytic_flops(c: Config, training: bool) -> float:
    """FLOPs of one sequence by the PaLM formula as workloads/language.analytic_flops counts
    them (6 per matmul weight per token, the head included, plus attention's 12 L H d s)."""
    kv = c.kv_heads * c.head_dim
    per_block = 2 * c.hidden * c.hidden + 2 * c.hidden * kv + 3 * c.hidden * c.mlp + 2 * c.hidden
    weights = c.layers * per_block + c.hidden + c.hidden * c.vocab
    attention = 12 * c.layers * c.heads * c.head_dim * c.seq_len
    return (6 * weights + attention) * c.seq_len / (1 if training else 3)
