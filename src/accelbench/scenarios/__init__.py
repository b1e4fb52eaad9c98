"""How a workload is measured: scenario name -> function(spec, workload, device) -> metrics."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from accelbench.spec import RunSpec
    from accelbench.workload import Workload

ScenarioFn = Callable[["RunSpec", "Workload", "torch.device"], Any]


def get(name: str) -> ScenarioFn:
    from accelbench.scenarios import generate, infer, serve, server, time_to_train, train

    scenarios: dict[str, ScenarioFn] = {
        "train": train.measure,
        "infer": infer.measure,
        "server": server.measure,
        "time-to-train": time_to_train.measure,
        "generate": generate.measure,
        "serve": serve.measure,
    }
    return scenarios[name]
