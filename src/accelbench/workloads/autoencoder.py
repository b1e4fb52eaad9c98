"""The paper's representative image-compression model (seed 003, section 3.4; log in seed 000).

The paper describes it only as an autoencoder of residual blocks and one bottleneck that learns to
reconstruct 28x28 single-channel MNIST images; its training log gives 8,922,155 parameters. The
layers are not published, so this is a reconstruction with that structure and that size (8,921,329
parameters): residual stages at 28x28, 14x14 and 7x7, a 1x1 convolutional bottleneck, and the
mirror image back up (autoencoder_model.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.workload import Batch, Images, Workload, reading

if TYPE_CHECKING:
    import torch

WIDTHS = (16, 96, 320)  # channels at 28x28, 14x14, 7x7: the published size at the least compute
BLOCKS_PER_STAGE = 2
BOTTLENECK_CHANNELS = 16  # 7x7x16 = 784 numbers code one 784-pixel image


def autoencoder() -> Workload:
    """The paper's image-compression autoencoder: residual blocks, one bottleneck, 28x28x1, 8.9M params."""
    import torch.nn.functional as F

    def build_model() -> torch.nn.Module:
        from accelbench.workloads.autoencoder_model import autoencoder

        return autoencoder(WIDTHS, BLOCKS_PER_STAGE, BOTTLENECK_CHANNELS)

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.mse_loss(model(batch["image"]), batch["image"])

    # Reads greyscale images with pixel intensities in [0, 1]: MNIST IDX files, or any image data
    # resized to 28x28. The label is not used.
    return reading(Images(1, 28, num_classes=10, recipe="plain"), build_model, loss, "images")
