"""Your own model in accelbench: a function that returns an accelbench.Workload.

    accelbench run examples/my_model.py:build --batch-size 32,128
    accelbench run examples/my_model.py:build --model-arg width=64 --data path/to/imagefolder

The contract is four things (the fifth, `reads`, is optional):
- build_model(): a fresh torch.nn.Module with random weights;
- make_sample(generator): one synthetic item, a dict of tensors without the batch dimension;
- loss(model, batch): the scalar loss of a collated batch, already on the device;
- item_unit: what one item is, the unit of throughput;
- reads: the kind of real data it can train on (accelbench.Images or accelbench.Tokens). The
  `reading` helper makes `make_sample` from it, so synthetic and real data take the same path.

`build` is called with the --model-arg values as keyword arguments. accelbench moves batches to
the device, applies the precision (autocast, dtype), compiles, steps the optimizer and times it.
"""

import torch
import torch.nn.functional as F

from accelbench import Images, Workload, reading


def build(width: int = 32, image_size: int = 32, num_classes: int = 10) -> Workload:
    """A small convolutional classifier on 32x32 RGB images, CIFAR-10 shaped."""

    def build_model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, width, 3, padding=1),
            torch.nn.BatchNorm2d(width),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(width, 2 * width, 3, padding=1),
            torch.nn.BatchNorm2d(2 * width),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(2 * width, num_classes),
        )

    def loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(model(batch["image"]), batch["label"])

    return reading(Images(3, image_size, num_classes), build_model, loss, "images")
