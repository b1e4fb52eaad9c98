"""The loader scenario: the input pipeline by itself, the ceiling a model's training rate can
reach on this host. The workload's DataLoader (its synthetic items or `--data`, `--workers`,
pinned memory on CUDA) is drawn from as training draws from it, and nothing else runs: no model,
no copy to the device. Its headline is items per second over the steady epochs, with the
interval and verdicts of any cell's rate; `accelbench roofline` sets a model's rate beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.scenarios.base import Scenario

if TYPE_CHECKING:
    from accelbench.records.spec import RunSpec


def _rules(spec: RunSpec) -> None:
    if spec.replicas > 1 or spec.tensor_parallel > 1 or spec.pipeline_stages > 1 or spec.fsdp:
        raise ValueError("loader measures one process's input pipeline: leave out --replicas")


SCENARIO = Scenario(
    name="loader",
    summary="the input pipeline alone: the workload's DataLoader drawn from, items/s",
    measure="accelbench.scenarios.loader.measure:measure",
    rules=_rules,
    views=frozenset({"input-ceiling"}),
)
