"""Small workloads for fast checks of the harness itself."""

from __future__ import annotations

from accelbench.workload import Batch, Workload


def tiny_mlp() -> Workload:
    """A 2-layer MLP on 64 features, 10 classes: seconds per run, for tests and smoke checks."""
    import torch
    import torch.nn.functional as F

    def build_model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
        )

    def make_sample(gen: torch.Generator) -> Batch:
        return {"x": torch.randn(64, generator=gen), "label": torch.randint(10, (), generator=gen)}

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.cross_entropy(model(batch["x"]), batch["label"])

    return Workload("samples", build_model, make_sample, loss)
