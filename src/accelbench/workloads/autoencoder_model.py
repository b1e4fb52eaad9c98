"""Layers of the paper's autoencoder (see autoencoder.py); imported only when the model is built."""

from __future__ import annotations

import torch
from torch import nn


class ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


def conv_bn(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
    )


def up_bn(c_in: int, c_out: int) -> nn.Sequential:
    """Doubles height and width."""
    return nn.Sequential(
        nn.ConvTranspose2d(c_in, c_out, 4, 2, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()
    )


def autoencoder(widths: tuple[int, int, int], blocks: int, bottleneck: int) -> nn.Sequential:
    """28x28x1 -> (bottleneck)x7x7 -> 28x28x1, with `blocks` residual blocks at each resolution."""

    def stage(width: int) -> list[nn.Module]:
        return [ResidualBlock(width) for _ in range(blocks)]

    w1, w2, w3 = widths
    encoder = nn.Sequential(
        conv_bn(1, w1),
        *stage(w1),
        conv_bn(w1, w2, stride=2),
        *stage(w2),  # 14x14
        conv_bn(w2, w3, stride=2),
        *stage(w3),  # 7x7
        nn.Conv2d(w3, bottleneck, 1),
    )
    decoder = nn.Sequential(
        conv_bn(bottleneck, w3),
        *stage(w3),
        up_bn(w3, w2),
        *stage(w2),  # 14x14
        up_bn(w2, w1),
        *stage(w1),  # 28x28
        nn.Conv2d(w1, 1, 3, padding=1),
        nn.Sigmoid(),  # intensities in [0, 1]
    )
    return nn.Sequential(encoder, decoder)
