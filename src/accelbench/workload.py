"""What a workload is: data, not a class hierarchy.

A workload says how to build its model, how to make one synthetic sample on the host, and how to
compute the loss of a batch. Scenarios (how it is measured) and engines (how a step executes) use
these three functions and nothing else, so adding a workload touches neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

Batch = dict[str, "torch.Tensor"]


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
