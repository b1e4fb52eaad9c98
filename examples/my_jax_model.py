"""Your own model under --framework jax: a function that returns an
accelbench.engines.jax.models.Model.

    accelbench run examples/my_jax_model.py:build --framework jax --batch-size 32,128
    accelbench run examples/my_jax_model.py:build --framework jax --model-arg width=256

The contract, as for a torch model (examples/my_model.py), in JAX's terms:
- init(key): the parameters (any pytree) and state (a pytree the step carries, such as batch
  norm's running statistics; {} for none), from a jax.random key;
- apply(params, state, inputs, training): the output and the state after it;
- sample(generator, n): a host batch of n synthetic items from a numpy Generator, a dict whose
  "x" is the model's input;
- loss(output, batch): the scalar loss;
- item_unit: what one item is, the unit of throughput (tokens_per_item and analytic_flops are
  optional, for language models).

`build` is called with the --model-arg values as keyword arguments. accelbench jits the step
(value_and_grad and optax's optimizer, the buffers donated), feeds the batches, applies the
precision (bf16 or amp-bf16 casts of the weights and floating inputs), times it and stores it
as any cell.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from accelbench.engines.jax.models import Model


def build(width: int = 128, features: int = 64, classes: int = 10) -> Model:
    """A two-layer perceptron on `features` numbers, `classes` classes."""

    def init(key: jax.Array) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
        k1, k2 = jax.random.split(key)
        params = {
            "w1": jax.random.normal(k1, (features, width)) / features**0.5,
            "b1": jnp.zeros(width),
            "w2": jax.random.normal(k2, (width, classes)) / width**0.5,
            "b2": jnp.zeros(classes),
        }
        return params, {}

    def apply(
        params: dict[str, jax.Array], state: dict[str, jax.Array], x: jax.Array, training: bool
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        return hidden @ params["w2"] + params["b2"], state

    def sample(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        x = rng.standard_normal((n, features), dtype=np.float32)
        return {"x": x, "label": rng.integers(0, classes, n, dtype=np.int32)}

    def loss(logits: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
        labels = batch["label"]
        return optax.softmax_cross_entropy_with_integer_labels(
            logits.astype(jnp.float32), labels
        ).mean()

    return Model(init, apply, sample, loss, item_unit="samples")
