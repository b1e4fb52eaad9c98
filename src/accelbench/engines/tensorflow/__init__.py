"""TensorFlow (Keras 3 on its TensorFlow backend) as an engine: the train, infer and
time-to-train scenarios of the seeds' small models (tiny_mlp, lenet5 and the paper's
autoencoder, whose training log in the seeds is Keras output), ResNet-50 and a user's
`file.py:build` returning a Model, each a Keras model with the torch model's layers and
parameters (models.py; equal trainable counts, a test), trained by a tf.function step with
Keras' optimizer (train.py), also on the torch workload's real records to a held-out target
(time_to_train.py), and measured by the kit every scenario shares. With --replicas N, training
is data parallel over N processes, TensorFlow's workers under a MultiWorkerMirroredStrategy.

This module describes the engine (it imports neither tensorflow nor torch); the registry of
engines (accelbench/engines) names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.engines import Framework, one_device

if TYPE_CHECKING:
    from accelbench.records.spec import RunSpec


def _rules(spec: RunSpec) -> None:
    lacks = {"--channels-last (Keras lays images out so)": spec.channels_last}
    one_device("tensorflow", spec, lacks, replicas=True, reads_data=True)


FRAMEWORK = Framework(
    name="tensorflow",
    summary="TensorFlow with Keras 3: training, time to train and inference of the seeds' small "
    "models and ResNet-50",
    measures={
        "train": "accelbench.engines.tensorflow.train:measure",
        "infer": "accelbench.engines.tensorflow.infer:measure",
        "time-to-train": "accelbench.engines.tensorflow.time_to_train:measure",
    },
    workloads=("tiny_mlp", "lenet5", "autoencoder", "resnet50"),
    user_models="examples/my_keras_model.py",
    precisions=("fp32", "amp-bf16"),
    rules=_rules,
)
