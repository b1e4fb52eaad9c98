"""What a workload is: data, not a class hierarchy.

A workload says how to build its model, how to make one synthetic sample on the host, and how to
compute the loss of a batch. Scenarios (how it is measured) and engines (how a step executes) use
these functions and nothing else, so adding a workload touches neither.

A workload that can also train on real local data says what kind of record it reads (`reads`) and
how a record becomes one of its samples (`prepare`): images, tokens or arrays. The data readers
(data.py) make the records.

A user's own model is a function that returns a Workload (see examples/my_model.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

Batch = dict[str, "torch.Tensor"]


@dataclass(frozen=True)
class Images:
    """Image records: {"image": float channels x size x size, "label": int64 scalar}."""

    channels: int
    """1 (read as greyscale) or 3 (read as RGB)."""
    size: int
    """Images are cropped and resized to size x size."""
    num_classes: int
    """Labels of the data must be below this."""
    recipe: Literal["imagenet", "plain"] = "imagenet"
    """How real images are read. imagenet: the ImageNet training pipeline (random resized crop,
    flip, normalised by ImageNet's mean and deviation); plain: resize and centre crop, pixels in
    [0, 1]. Synthetic images follow it too: normal noise, or uniform in [0, 1]."""


@dataclass(frozen=True)
class Tokens:
    """Token records: {"input_ids": int64 seq_len}, consecutive ids from a token file."""

    seq_len: int
    vocab_size: int
    """Ids of the data must be below this."""


@dataclass(frozen=True)
class Arrays:
    """Array records: {"features": float32 features, "target": float32 targets}, row i of the two
    .npy files of a directory (features.npy, targets.npy): tabular data, time-series windows."""

    features: tuple[int, ...]
    """The shape of one record's features, e.g. (window, channels)."""
    targets: tuple[int, ...] = ()
    """The shape of one record's targets; () for one number per record."""


Reads = Images | Tokens | Arrays


def _as_is(record: Batch, gen: torch.Generator) -> Batch:
    return record


@dataclass(frozen=True)
class Workload:
    """Its name is the registry's key (workloads/__init__.py), so it is not repeated here."""

    item_unit: str
    """What one item of a batch is ("images", "sequences"): the unit of throughput."""
    build_model: Callable[[], torch.nn.Module]
    """A fresh model with random weights; never downloads."""
    make_sample: Callable[[torch.Generator], Batch]
    """One item (no batch dimension) generated on the host from the generator."""
    loss: Callable[[torch.nn.Module, Batch], torch.Tensor]
    """The scalar training loss of a collated batch already on the device."""
    reads: Reads | None = None
    """The kind of real data it can train on (`--data`); None: synthetic data only."""
    prepare: Callable[[Batch, torch.Generator], Batch] = _as_is
    """Turns one record of real data into one sample (adds masks, labels, ...); runs on the host,
    in the loader workers."""
    correct: Callable[[torch.nn.Module, Batch], torch.Tensor] | None = None
    """Classifiers: how many items of a batch on the device the model labels right (a scalar
    tensor), for the val_accuracy target of time-to-train; None: not a classifier."""
    analytic_flops: Callable[[bool], float | None] | None = None
    """FLOPs of one item's pass by a published formula (training: True for forward and
    backward), set beside the counted ones; None where no formula is known."""
    active_share: float | None = None
    """A mixture of experts: the share of its expert weights each token runs through (experts
    per token over experts), by which analytic_flops counts them; None for a dense model."""
    fixed_shapes: bool = True
    """False for a workload whose batches change shape from step to step (sequences of many
    lengths, graphs of many sizes): cuDNN autotuning is then off by default, as it would tune
    again at every new shape."""

    @property
    def tokens_per_item(self) -> int | None:
        """Tokens in one item of a language model (its sequence length); None for others."""
        return self.reads.seq_len if isinstance(self.reads, Tokens) else None


def synthetic_record(reads: Reads, gen: torch.Generator) -> Batch:
    """A random record of the kind real data would give: what `make_sample` starts from."""
    import torch

    if isinstance(reads, Arrays):
        return {
            "features": torch.randn(reads.features, generator=gen),
            "target": torch.randn(reads.targets, generator=gen),
        }
    if isinstance(reads, Images):
        size = (reads.channels, reads.size, reads.size)
        normal = reads.recipe == "imagenet"
        image = torch.randn(size, generator=gen) if normal else torch.rand(size, generator=gen)
        return {"image": image, "label": torch.randint(reads.num_classes, (), generator=gen)}
    return {"input_ids": torch.randint(reads.vocab_size, (reads.seq_len,), generator=gen)}


def reading(
    reads: Reads,
    build_model: Callable[[], torch.nn.Module],
    loss: Callable[[torch.nn.Module, Batch], torch.Tensor],
    item_unit: str,
    prepare: Callable[[Batch, torch.Generator], Batch] = _as_is,
    correct: Callable[[torch.nn.Module, Batch], torch.Tensor] | None = None,
) -> Workload:
    """A workload whose synthetic samples are random records of the kind it reads, prepared the
    same way as real ones, so synthetic and real data take the same path."""

    def make_sample(gen: torch.Generator) -> Batch:
        return prepare(synthetic_record(reads, gen), gen)

    return Workload(item_unit, build_model, make_sample, loss, reads, prepare, correct)


def classifier(
    reads: Images, build_model: Callable[[], torch.nn.Module], item_unit: str = "images"
) -> Workload:
    """An image classifier trained with cross-entropy on the records' labels."""
    import torch.nn.functional as F

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(model(batch["image"]), batch["label"])

    def correct(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return (model(batch["image"]).argmax(dim=1) == batch["label"]).sum()

    return reading(reads, build_model, loss, item_unit, correct=correct)
