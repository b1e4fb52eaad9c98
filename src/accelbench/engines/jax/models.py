"""The JAX models, of plain jax.numpy and lax: the torch models' layers in order, with their
shapes, their parameters (weights, biases, batch norm's scale and shift; its running statistics
are state) and PyTorch's default initial scale (uniform within 1/sqrt(fan in)), laid out NCHW as
torch lays them out. A model is a list of layers; `init` and `apply` walk it.

No Flax: these are a few layers, and Flax would bring Orbax's checkpointing stack with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from accelbench.engines.jax import DECODERS
from accelbench.workloads.autoencoder import BLOCKS_PER_STAGE, BOTTLENECK_CHANNELS, WIDTHS

Layer = tuple[Any, ...]
"""("conv", c_in, c_out, kernel, stride, padding, bias), ("up", c_in, c_out) (a transposed
4x4 convolution, stride 2, padding 1: twice the height and width), ("bn", channels),
("res", width) (conv, bn, relu, conv, bn, plus the input, relu), ("bottleneck", c_in, width,
stride) (ResNet v1.5's: 1x1, 3x3 of that stride, 1x1 to 4 x width, each with bn, plus the
input, projected by a strided 1x1 and bn where its shape differs, relu), ("dense", fan_in,
fan_out), ("relu",), ("sigmoid",), ("pool", window, stride, padding) (max), ("mean",) (over
height and width), ("flatten",)."""
NCHW = ("NCHW", "OIHW", "NCHW")
BN_EPS, BN_MOMENTUM = 1e-5, 0.1  # torch's BatchNorm2d defaults


@dataclass(frozen=True)
class Model:
    init: Callable[[jax.Array], tuple[Any, Any]]
    """Parameters and state (batch norm's running statistics) from a random key."""
    apply: Callable[[Any, Any, jax.Array, bool], tuple[jax.Array, Any]]
    """(params, state, inputs, training) -> (output, state after it)."""
    sample: Callable[[np.random.Generator, int], dict[str, np.ndarray]]
    """A host batch of `n` synthetic items, as the torch workload's synthetic records are."""
    loss: Callable[[jax.Array, dict[str, jax.Array]], jax.Array]
    """The scalar loss of the model's output on a batch."""
    item_unit: str = "images"
    tokens_per_item: int | None = None
    analytic_flops: Callable[[bool], float] | None = None
    """FLOPs of one item by the published formula the torch workload uses; None: none."""


def layered(
    layers: list[Layer],
    sample: Callable[[np.random.Generator, int], dict[str, np.ndarray]],
    loss: Callable[[jax.Array, dict[str, jax.Array]], jax.Array],
    item_unit: str = "images",
) -> Model:
    """A model that is a list of layers, walked by init() and apply()."""
    return Model(partial(init, layers), partial(apply, layers), sample, loss, item_unit)


def _llama(name: str) -> Model:
    from accelbench.engines.jax import decoder

    c = decoder.config(name)
    return Model(
        init=lambda key: (decoder.init(c, key), {}),
        apply=lambda params, state, ids, train: (decoder.logits(c, params, ids), state),
        sample=partial(decoder.sample, c),
        loss=decoder.next_token_loss,
        item_unit="sequences",
        tokens_per_item=c.seq_len,
        analytic_flops=partial(decoder.analytic_flops, c),
    )


def _images(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """28x28 greyscale images uniform in [0, 1] and labels below 10: the "plain" recipe."""
    image = rng.random((n, 1, 28, 28), dtype=np.float32)
    return {"x": image, "label": rng.integers(0, 10, n, dtype=np.int32)}


def _imagenet(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """224x224 RGB images of normal noise (as normalised by ImageNet's recipe), labels below
    1000."""
    image = rng.standard_normal((n, 3, 224, 224), dtype=np.float32)
    return {"x": image, "label": rng.integers(0, 1000, n, dtype=np.int32)}


def _features(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    x = rng.standard_normal((n, 64), dtype=np.float32)
    return {"x": x, "label": rng.integers(0, 10, n, dtype=np.int32)}


def _cross_entropy(logits: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    import optax

    labels = batch["label"]
    return optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels
    ).mean()


def _reconstruction(image: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
    return jnp.mean((image.astype(jnp.float32) - batch["x"].astype(jnp.float32)) ** 2)


def _autoencoder() -> list[Layer]:
    """The paper's autoencoder as workloads/autoencoder_model.py builds it."""
    (w1, w2, w3), blocks, code = WIDTHS, BLOCKS_PER_STAGE, BOTTLENECK_CHANNELS

    def conv_bn(c_in: int, c_out: int, stride: int = 1) -> list[Layer]:
        return [("conv", c_in, c_out, 3, stride, 1, False), ("bn", c_out), ("relu",)]

    def up_bn(c_in: int, c_out: int) -> list[Layer]:
        return [("up", c_in, c_out), ("bn", c_out), ("relu",)]

    def stage(width: int) -> list[Layer]:
        return [("res", width)] * blocks

    return [
        *conv_bn(1, w1),
        *stage(w1),
        *conv_bn(w1, w2, 2),
        *stage(w2),
        *conv_bn(w2, w3, 2),
        *stage(w3),
        ("conv", w3, code, 1, 1, 0, True),
        *conv_bn(code, w3),
        *stage(w3),
        *up_bn(w3, w2),
        *stage(w2),
        *up_bn(w2, w1),
        *stage(w1),
        ("conv", w1, 1, 3, 1, 1, True),
        ("sigmoid",),
    ]


def _resnet50() -> list[Layer]:
    """ResNet-50 v1.5 as timm builds it (the stride on the 3x3 convolution), 1000 classes."""
    stem: list[Layer] = [("conv", 3, 64, 7, 2, 3, False), ("bn", 64), ("relu",), ("pool", 3, 2, 1)]
    blocks: list[Layer] = []
    c_in = 64
    for width, depth, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(depth):
            blocks.append(("bottleneck", c_in, width, stride if i == 0 else 1))
            c_in = 4 * width
    return [*stem, *blocks, ("mean",), ("dense", c_in, 1000)]


MODELS: dict[str, Callable[[], Model]] = {
    "tiny_mlp": lambda: layered(
        [("dense", 64, 128), ("relu",), ("dense", 128, 10)], _features, _cross_entropy, "samples"
    ),
    "lenet5": lambda: layered(
        [
            ("conv", 1, 6, 5, 1, 2, True),
            ("relu",),
            ("pool", 2, 2, 0),
            ("conv", 6, 16, 5, 1, 0, True),
            ("relu",),
            ("pool", 2, 2, 0),
            ("flatten",),
            ("dense", 16 * 5 * 5, 120),
            ("relu",),
            ("dense", 120, 84),
            ("relu",),
            ("dense", 84, 10),
        ],
        _images,
        _cross_entropy,
    ),
    "autoencoder": lambda: layered(_autoencoder(), _images, _reconstruction),
    "resnet50": lambda: layered(_resnet50(), _imagenet, _cross_entropy),
    **{name: partial(_llama, name) for name in DECODERS},
}


def get(name: str, model_args: dict[str, Any] | None = None) -> Model:
    """A built-in model by its workload name, or a user's `file.py:function` called with the
    model args, which must return a Model (examples/my_jax_model.py)."""
    from accelbench.engines import user_model

    return MODELS[name]() if name in MODELS else user_model(name, model_args, Model, "jax")


def init(layers: list[Layer], key: jax.Array) -> tuple[list[Any], list[Any]]:
    """Each layer's parameters and state (batch norm's running statistics), in order, drawn on
    the host from a generator seeded by the key: drawn by jax.random, each parameter's shape
    was an XLA program of its own to compile (half of a LeNet-5 cell's 20 s on a CPU)."""
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)))
    params, state = _init_all(layers, rng)
    return jax.tree.map(jnp.asarray, params), jax.tree.map(jnp.asarray, state)


def _init_all(layers: list[Layer], rng: np.random.Generator) -> tuple[list[Any], list[Any]]:
    params: list[Any] = []
    state: list[Any] = []
    for layer in layers:
        p, s = _init(layer, rng)
        params.append(p)
        state.append(s)
    return params, state


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    bound = 1 / math.sqrt(fan_in)
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def _init(layer: Layer, rng: np.random.Generator) -> tuple[Any, Any]:
    kind, *shape = layer
    if kind == "conv":
        c_in, c_out, k, _, _, bias = shape
        fan = c_in * k * k
        w = _uniform(rng, (c_out, c_in, k, k), fan)
        return ({"w": w, "b": _uniform(rng, (c_out,), fan)} if bias else {"w": w}), {}
    if kind == "up":  # torch's ConvTranspose2d weight: (in, out, k, k), its fan in out*k*k
        c_in, c_out = shape
        return {"w": _uniform(rng, (c_in, c_out, 4, 4), c_out * 16)}, {}
    if kind == "dense":
        fan_in, fan_out = shape
        return {
            "w": _uniform(rng, (fan_in, fan_out), fan_in),
            "b": _uniform(rng, (fan_out,), fan_in),
        }, {}
    if kind == "bn":
        (c,) = shape
        return _bn_init(c)
    if kind in ("res", "bottleneck"):
        main, shortcut = _residual(layer)
        (pm, sm), (ps, ss) = _init_all(main, rng), _init_all(shortcut, rng)
        return {"main": pm, "shortcut": ps}, {"main": sm, "shortcut": ss}
    return {}, {}


def _residual(layer: Layer) -> tuple[list[Layer], list[Layer]]:
    """A residual block's main path and its shortcut's (none: the input as it is)."""
    kind, *shape = layer
    if kind == "res":
        (w,) = shape
        conv_bn: list[Layer] = [("conv", w, w, 3, 1, 1, False), ("bn", w)]
        return [*conv_bn, ("relu",), *conv_bn], []
    c_in, width, stride = shape
    c_out = 4 * width
    main: list[Layer] = [
        *(("conv", c_in, width, 1, 1, 0, False), ("bn", width), ("relu",)),
        *(("conv", width, width, 3, stride, 1, False), ("bn", width), ("relu",)),
        *(("conv", width, c_out, 1, 1, 0, False), ("bn", c_out)),
    ]
    same = stride == 1 and c_in == c_out
    return main, [] if same else [("conv", c_in, c_out, 1, stride, 0, False), ("bn", c_out)]


def _bn_init(c: int) -> tuple[Any, Any]:
    """A buffer each (a step donates them, and one given twice cannot be)."""
    ones, zeros = partial(np.ones, (c,), np.float32), partial(np.zeros, (c,), np.float32)
    return {"scale": ones(), "shift": zeros()}, {"mean": zeros(), "var": ones()}


def apply(
    layers: list[Layer], params: list[Any], state: list[Any], x: jax.Array, train: bool
) -> tuple[jax.Array, list[Any]]:
    """The model's output on a batch, and its state after it (batch statistics folded into the
    running ones when training, as torch's batch norm does)."""
    new_state = []
    for layer, p, s in zip(layers, params, state, strict=True):
        x, s = _apply(layer, p, s, x, train)
        new_state.append(s)
    return x, new_state


def _apply(layer: Layer, p: Any, s: Any, x: jax.Array, train: bool) -> tuple[jax.Array, Any]:
    kind, *shape = layer
    if kind == "conv":
        _, _, _, stride, pad, _ = shape
        y = lax.conv_general_dilated(
            x, p["w"].astype(x.dtype), (stride, stride), [(pad, pad)] * 2, dimension_numbers=NCHW
        )
        return (y + p["b"].astype(x.dtype)[None, :, None, None] if "b" in p else y), s
    if kind == "up":  # padding k - 1 - 1 of the dilated input: torch's output size, 2h x 2w
        y = lax.conv_transpose(
            x,
            p["w"].astype(x.dtype),
            (2, 2),
            [(2, 2), (2, 2)],
            dimension_numbers=NCHW,  # torch's (in, out) weight: the forward conv's (out, in)
            transpose_kernel=True,
        )
        return y, s
    if kind == "dense":
        return x @ p["w"].astype(x.dtype) + p["b"].astype(x.dtype), s
    if kind == "bn":
        return _batch_norm(p, s, x, train)
    if kind in ("res", "bottleneck"):
        main, shortcut = _residual(layer)
        y, sm = apply(main, p["main"], s["main"], x, train)
        r, ss = apply(shortcut, p["shortcut"], s["shortcut"], x, train)
        return jax.nn.relu(r + y), {"main": sm, "shortcut": ss}
    if kind == "relu":
        return jax.nn.relu(x), s
    if kind == "sigmoid":
        return jax.nn.sigmoid(x), s
    if kind == "pool":
        k, stride, pad = shape
        padding = [(0, 0), (0, 0), (pad, pad), (pad, pad)]
        window, strides = (1, 1, k, k), (1, 1, stride, stride)
        return lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding), s
    if kind == "mean":
        return x.mean((2, 3)), s
    if kind == "flatten":
        return x.reshape(x.shape[0], -1), s
    raise ValueError(f"no such layer: {kind}")


def _batch_norm(p: Any, s: Any, x: jax.Array, train: bool) -> tuple[jax.Array, Any]:
    """Batch norm over (N, H, W) per channel, its statistics in float32."""
    x32 = x.astype(jnp.float32)
    if train:
        mean, var = x32.mean((0, 2, 3)), x32.var((0, 2, 3))
        n = x.size // x.shape[1]
        s = {
            "mean": (1 - BN_MOMENTUM) * s["mean"] + BN_MOMENTUM * mean,
            "var": (1 - BN_MOMENTUM) * s["var"] + BN_MOMENTUM * var * n / max(n - 1, 1),
        }
    else:
        mean, var = s["mean"], s["var"]
    scale = p["scale"].astype(jnp.float32) * lax.rsqrt(var + BN_EPS)
    y = (x32 - mean[None, :, None, None]) * scale[None, :, None, None]
    return (y + p["shift"].astype(jnp.float32)[None, :, None, None]).astype(x.dtype), s


def num_params(params: Any) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(params))
