"""Your own model under --framework tensorflow: a function that returns an
accelbench.engines.tensorflow.models.Model.

    accelbench run examples/my_keras_model.py:build --framework tensorflow --batch-size 32,128
    accelbench run examples/my_keras_model.py:build --framework tensorflow --model-arg width=256

The contract, as for a torch model (examples/my_model.py), in Keras' terms:
- build(): a fresh keras.Model with random weights (built under the precision policy accelbench
  sets: mixed_bfloat16 for amp-bf16; keep the last layer's dtype float32 for a stable loss);
- sample(generator, n): a host batch of n synthetic items from a numpy Generator, (inputs,
  targets);
- loss(): a fresh Keras loss;
- item_unit: what one item is, the unit of throughput.

`build` below is called with the --model-arg values as keyword arguments. accelbench makes a
tf.function step (GradientTape, Keras' SGD or AdamW), feeds the batches, times it and stores it
as any cell.
"""

import keras
import numpy as np

from accelbench.engines.tensorflow.models import Model


def build(width: int = 128, features: int = 64, classes: int = 10) -> Model:
    """A two-layer perceptron on `features` numbers, `classes` classes."""

    def model() -> keras.Model:
        return keras.Sequential(
            [
                keras.Input((features,)),
                keras.layers.Dense(width, activation="relu"),
                keras.layers.Dense(classes, dtype="float32"),
            ]
        )

    def sample(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((n, features), dtype=np.float32)
        return x, rng.integers(0, classes, n, dtype=np.int32)

    def loss() -> keras.losses.Loss:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    return Model(model, sample, loss, item_unit="samples")
