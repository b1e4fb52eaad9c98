"""JAX as an engine: the train scenario of the seeds' small models (tiny_mlp, lenet5 and the
paper's autoencoder), ResNet-50 and Llama 3's shapes (llama3_tiny, 3.2 1B and 3B, 3.1 8B), each
of plain jax.numpy and lax with the torch model's layers, shapes and parameters (models.py,
decoder.py; equal parameter counts, a test), trained by a jitted step with optax's optimizer
(train.py), also on the torch workload's real records to a held-out target
(time_to_train.py); inference (infer.py), and the decoders' greedy generation with a key-value
cache (generate.py); each measured by the kit every scenario shares (scenarios/epochs.py): the
first epoch holds tracing and XLA's compilation, the steady state's delivered rate and interval,
divergence, energy and the host's activity as for any cell. With --replicas N, training is data
parallel over N processes (jax.distributed; on CPUs over gloo's collectives), each a replica.

This module describes the engine (it imports neither jax nor torch); the registry of engines
(accelbench/engines) names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.engines import Framework, one_device

if TYPE_CHECKING:
    from accelbench.records.spec import RunSpec


DECODERS = ("llama3_tiny", "llama3_2_1b", "llama3_2_3b", "llama3_1_8b")
"""The Llama-shaped decoders (decoder.py), by the torch workloads' names: what generates."""


def _rules(spec: RunSpec) -> None:
    if spec.scenario == "generate" and spec.workload not in DECODERS:
        raise ValueError(
            f"--framework jax generates with {', '.join(DECODERS)}, not {spec.workload}: "
            "give one of those, or --framework torch"
        )
    lacks = {
        "--compile (jax compiles every step)": spec.compile,
        "--channels-last": spec.channels_last,
    }
    # infer, time-to-train and generate run one process: their own rules. All but generation
    # (of random prompts, as torch's) read --data.
    one_device("jax", spec, lacks, replicas=True, reads_data=spec.scenario != "generate")


FRAMEWORK = Framework(
    name="jax",
    summary="JAX (jit, optax): training, time to train and inference of the seeds' small models, "
    "ResNet-50 and Llama 3, and Llama 3's generation",
    measures={
        "train": "accelbench.engines.jax.train:measure",
        "infer": "accelbench.engines.jax.infer:measure",
        "time-to-train": "accelbench.engines.jax.time_to_train:measure",
        "generate": "accelbench.engines.jax.generate:measure",
    },
    workloads=("tiny_mlp", "lenet5", "autoencoder", "resnet50", *DECODERS),
    user_models="examples/my_jax_model.py",
    precisions=("fp32", "bf16", "amp-bf16"),
    rules=_rules,
)
