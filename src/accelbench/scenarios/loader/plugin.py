"""The loader plug-in: what the core reads of the loader scenario (its rules)."""

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
