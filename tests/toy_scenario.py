"""A scenario written as a user would write one, in one file: forward passes under no_grad, its
record the model's parameter count and mean loss, with two knobs, a headline, lines and columns
of its own. tests/test_scenarios.py registers it through $ACCELBENCH_SCENARIOS."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import Field

from accelbench.scenarios import Headline, Record, Scenario
from accelbench.scenarios.base import Namer, Settings, record_of

if TYPE_CHECKING:
    import torch

    from accelbench.records.metrics import Metrics
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec
    from accelbench.workload import Workload


class ToySettings(Settings):
    toy_passes: int = Field(default=1, ge=1, le=64)
    """toy: forward passes of the batch in each step."""
    toy_note: str = "plain"
    """toy: a word its lines end with."""


class ToyRecord(Record):
    kind: str = "toy"
    parameters: int
    mean_loss: float


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    import torch

    from accelbench.execution.data import make_loader
    from accelbench.scenarios.epochs import Raw, build_metrics, measured_epochs

    own = ToySettings.of(spec)
    model = workload.build_model().to(device).eval()
    batch = next(iter(make_loader(workload, spec, pin_memory=False)))
    raw = Raw()
    with torch.no_grad():
        for _ in measured_epochs(spec, device, raw):
            for _ in range(spec.steps_per_epoch):
                start = time.perf_counter()
                for _ in range(own.toy_passes):
                    loss = workload.loss(model, batch)
                raw.step_loss.append(float(loss))
                raw.step_ms.append((time.perf_counter() - start) * 1e3)
    raw.wait_ms = [0.0] * len(raw.step_ms)
    metrics = build_metrics(spec, workload, raw, [], timer="wall-clock", build_s=0.0, flops=None)
    record = ToyRecord(
        parameters=sum(p.numel() for p in model.parameters()),
        mean_loss=sum(raw.step_loss) / len(raw.step_loss),
    )
    return metrics.model_copy(update={"record": record})


def headline(result: Result) -> Headline | None:
    return None if result.metrics is None else Headline(result.metrics.items_per_s, "toy items/s")


def lines(result: Result, name: Namer) -> list[str]:
    toy = record_of(result, ToyRecord)
    assert toy is not None
    note = ToySettings.of(result.spec).toy_note
    return [
        f"{name(result.spec)}: toy: {toy.parameters} parameters, mean loss {toy.mean_loss:.3g}, {note}"
    ]


def columns(result: Result) -> Mapping[str, object]:
    toy = record_of(result, ToyRecord)
    return {"toy_parameters": toy.parameters} if toy else {}


SCENARIO = Scenario(
    name="toy",
    summary="forward passes under no_grad",
    measure=measure,
    settings=ToySettings,
    record=ToyRecord,
    headline=headline,
    views=frozenset({"batch"}),
    notes=lines,
    columns=columns,
)
