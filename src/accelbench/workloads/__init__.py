"""The workload registry: a name maps to a factory that builds the Workload.

Factories import torch, timm and transformers inside their bodies, so listing the registry stays
instant. The first line of a factory's docstring is the description `accelbench list` shows.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from accelbench.errors import AccelbenchError
from accelbench.workload import Workload
from accelbench.workloads import autoencoder, language, toy, vision

WORKLOADS: dict[str, Callable[[], Workload]] = {
    "resnet50": vision.resnet50,
    "resnext101_32x4d": vision.resnext101_32x4d,
    "efficientnet_b0": vision.efficientnet_b0,
    "efficientnet_b4": vision.efficientnet_b4,
    "mobilenetv3_small": vision.mobilenetv3_small,
    "mobilenetv3_large": vision.mobilenetv3_large,
    "vit_base_16": vision.vit_base_16,
    "swin_tiny": vision.swin_tiny,
    "bert_base_squad": language.bert_base_squad,
    "bert_large_squad": language.bert_large_squad,
    "autoencoder": autoencoder.autoencoder,
    "tiny_mlp": toy.tiny_mlp,
}


def describe(name: str) -> str:
    """The one-line description of a registered workload."""
    doc = WORKLOADS[name].__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def check_name(name: str) -> str:
    """Return `name` if it is registered, else raise with the closest names."""
    if name in WORKLOADS:
        return name
    close = difflib.get_close_matches(name, WORKLOADS, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise AccelbenchError(f"unknown workload {name!r}: {hint}`accelbench list` shows them all")


def get(name: str) -> Workload:
    """Build the workload registered as `name`."""
    return WORKLOADS[check_name(name)]()
