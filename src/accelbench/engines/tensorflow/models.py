"""The Keras models: the torch models' layers in order, with their shapes and trainable
parameters (batch norm's running statistics are Keras' non-trainable weights, torch's buffers),
laid out channels-last as TensorFlow lays images out on a CPU; torch's batch-norm momentum and
epsilon. Built under the global precision policy the caller sets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.workloads.autoencoder import BLOCKS_PER_STAGE, BOTTLENECK_CHANNELS, WIDTHS


@dataclass(frozen=True)
class Model:
    build: Callable[[], Any]
    """A fresh keras.Model with random weights."""
    sample: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
    """A host batch of n synthetic items: (inputs, targets)."""
    loss: Callable[[], Any]
    """A fresh Keras loss."""
    item_unit: str = "images"
    tokens_per_item: int | None = None


def _images(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """28x28 greyscale images uniform in [0, 1] (the "plain" recipe), labels below 10."""
    image = rng.random((n, 28, 28, 1), dtype=np.float32)
    return image, rng.integers(0, 10, n, dtype=np.int32)


def _imagenet(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """224x224 RGB images of normal noise (as normalised by ImageNet's recipe), labels below
    1000."""
    image = rng.standard_normal((n, 224, 224, 3), dtype=np.float32)
    return image, rng.integers(0, 1000, n, dtype=np.int32)


def _reconstructed(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    image, _ = _images(rng, n)
    return image, image


def _features(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((n, 64), dtype=np.float32)
    return x, rng.integers(0, 10, n, dtype=np.int32)


def _tiny_mlp() -> Any:
    import keras

    return keras.Sequential(
        [keras.Input((64,)), keras.layers.Dense(128, "relu"), keras.layers.Dense(10)]
    )


def _lenet5() -> Any:
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.Conv2D(6, 5, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(16, 5, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(120, "relu"),
            layers.Dense(84, "relu"),
            layers.Dense(10),
        ]
    )


def _norm(x: Any) -> Any:
    """torch's BatchNorm2d: momentum 0.1 of the new, epsilon 1e-5."""
    from keras import layers

    return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)


def _autoencoder() -> Any:
    """The paper's autoencoder as workloads/autoencoder_model.py builds it."""
    import keras
    from keras import layers

    def conv_bn(x: Any, width: int, stride: int = 1) -> Any:
        x = layers.Conv2D(width, 3, stride, padding="same", use_bias=False)(x)
        return layers.ReLU()(_norm(x))

    def up_bn(x: Any, width: int) -> Any:
        x = layers.Conv2DTranspose(width, 4, 2, padding="same", use_bias=False)(x)
        return layers.ReLU()(_norm(x))

    def stage(x: Any, width: int) -> Any:
        for _ in range(BLOCKS_PER_STAGE):
            y = conv_bn(x, width)
            y = _norm(layers.Conv2D(width, 3, padding="same", use_bias=False)(y))
            x = layers.ReLU()(layers.Add()([x, y]))
        return x

    (w1, w2, w3), code = WIDTHS, BOTTLENECK_CHANNELS
    image = keras.Input((28, 28, 1))
    x = stage(conv_bn(image, w1), w1)
    x = stage(conv_bn(x, w2, 2), w2)  # 14x14
    x = stage(conv_bn(x, w3, 2), w3)  # 7x7
    x = layers.Conv2D(code, 1)(x)
    x = stage(conv_bn(x, w3), w3)
    x = stage(up_bn(x, w2), w2)  # 14x14
    x = stage(up_bn(x, w1), w1)  # 28x28
    x = layers.Conv2D(1, 3, padding="same", activation="sigmoid", dtype="float32")(x)
    return keras.Model(image, x)


def _resnet50() -> Any:
    """ResNet-50 v1.5 as timm builds it: the stride on the 3x3 convolution and no convolution
    biases (Keras' own ResNet50 is v1, with them: 26,560 parameters more)."""
    import keras
    from keras import layers

    def conv_bn(x: Any, width: int, kernel: int, stride: int = 1) -> Any:
        return _norm(layers.Conv2D(width, kernel, stride, padding="same", use_bias=False)(x))

    def bottleneck(x: Any, width: int, stride: int) -> Any:
        y = layers.ReLU()(conv_bn(x, width, 1))
        y = layers.ReLU()(conv_bn(y, width, 3, stride))
        y = conv_bn(y, 4 * width, 1)
        same = stride == 1 and x.shape[-1] == 4 * width
        return layers.ReLU()(layers.Add()([x if same else conv_bn(x, 4 * width, 1, stride), y]))

    image = keras.Input((224, 224, 3))
    x = layers.ReLU()(conv_bn(image, 64, 7, 2))  # 112x112
    x = layers.MaxPooling2D(3, 2, padding="same")(x)  # 56x56
    for width, depth, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(depth):
            x = bottleneck(x, width, stride if i == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(image, layers.Dense(1000)(x))


def _cross_entropy() -> Any:
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _mean_squared() -> Any:
    import keras

    return keras.losses.MeanSquaredError()


MODELS: dict[str, Model] = {
    "tiny_mlp": Model(_tiny_mlp, _features, _cross_entropy, "samples"),
    "lenet5": Model(_lenet5, _images, _cross_entropy),
    "autoencoder": Model(_autoencoder, _reconstructed, _mean_squared),
    "resnet50": Model(_resnet50, _imagenet, _cross_entropy),
}


def get(name: str, model_args: dict[str, Any] | None = None) -> Model:
    """A built-in model by its workload name, or a user's `file.py:function` called with the
    model args, which must return a Model (examples/my_keras_model.py)."""
    from accelbench.engines import user_model

    return MODELS[name] if name in MODELS else user_model(name, model_args, Model, "tensorflow")


def trainable(model: Any) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)
