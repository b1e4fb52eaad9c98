"""A user model that runs out of memory above a micro batch, like a device would: for tests of
`accelbench tune`'s search on a CPU."""

import torch
import torch.nn.functional as F

from accelbench import Workload


def build(fits: int = 48, width: int = 64) -> Workload:
    def build_model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, 4)
        )

    def make_sample(generator: torch.Generator) -> dict[str, torch.Tensor]:
        return {
            "x": torch.randn(32, generator=generator),
            "y": torch.randint(0, 4, (), generator=generator),
        }

    def loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if batch["x"].shape[0] > fits:
            raise torch.OutOfMemoryError(f"out of memory: a micro batch above {fits} (simulated)")
        return F.cross_entropy(model(batch["x"]), batch["y"])

    return Workload(
        build_model=build_model, make_sample=make_sample, loss=loss, item_unit="samples"
    )
