"""Synthetic host data fed through a real DataLoader, so the input pipeline is part of a step."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

from accelbench.workload import Batch, Workload

POOL_SIZE = 64
"""Distinct samples generated up front; items cycle through them so that what is timed is the
loader (indexing, collation, worker transfer, pinning), not the random number generator."""


class SyntheticDataset(Dataset[Batch]):
    def __init__(self, workload: Workload, num_items: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.pool = [workload.make_sample(gen) for _ in range(min(POOL_SIZE, num_items))]
        self.num_items = num_items

    def __len__(self) -> int:
        return self.num_items

    def __getitem__(self, index: int) -> Batch:
        return self.pool[index % len(self.pool)]


def make_loader(
    workload: Workload, batch_size: int, num_batches: int, workers: int, seed: int, pin_memory: bool
) -> DataLoader[Batch]:
    """A loader yielding `num_batches` batches per pass; worker processes persist across epochs."""
    dataset = SyntheticDataset(workload, batch_size * num_batches, seed)
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=workers,
        persistent_workers=workers > 0,
        pin_memory=pin_memory,
        drop_last=True,
    )
