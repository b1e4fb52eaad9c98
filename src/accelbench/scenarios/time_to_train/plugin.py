"""The time-to-train plug-in: what the core reads of the scenario (its rules and columns; its
report, table and figure in report.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from accelbench.scenarios.base import Figure, Scenario, record_of
from accelbench.scenarios.time_to_train import TimeToTrain, TimeToTrainSettings, report
from accelbench.scenarios.train.plugin import MLLOG

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


def _rules(spec: RunSpec) -> None:
    if TimeToTrainSettings.of(spec).target is None:
        raise ValueError("time-to-train needs a --target such as val_loss<=0.02")
    if spec.data is None:
        raise ValueError(
            "time-to-train needs real data to hold out a validation split: give --data, a "
            "data set the workload reads (sklearn:digits is at hand for lenet5)"
        )
    if spec.distributed:
        raise ValueError(
            "time-to-train runs on one device so far: leave out --replicas, "
            "--pipeline-stages, --tensor-parallel and --fsdp"
        )
    if spec.inputs_on_device:
        raise ValueError(
            "--inputs-on-device cycles a few synthetic batches: leave it out with "
            "time-to-train, which reads real data"
        )


def _columns(result: Result) -> Mapping[str, object]:
    ttt = record_of(result, TimeToTrain)
    if ttt is None:
        return {}
    return {
        "target": ttt.target,
        "outcome": ttt.outcome,
        "time_to_target_s": ttt.time_to_target_s,
        "steps_to_target": ttt.steps_to_target,
        "passes_to_target": ttt.passes_to_target,
        "train_s": ttt.train_s,
        "eval_s": ttt.eval_s,
        "lr": ttt.lr,
    }


SCENARIO = Scenario(
    name="time-to-train",
    summary="optimizer steps on real data until a held-out metric reaches `target`",
    measure="accelbench.scenarios.time_to_train.measure:measure",
    trains=True,
    settings=TimeToTrainSettings,
    rules=_rules,
    record=TimeToTrain,
    objectives=("time-to-train",),
    notes=report.lines,
    exports=(MLLOG,),
    table=report.time_to_train_grid,
    findings=report.time_to_train_headlines,
    figures=(Figure("time-to-train", report.figure, any_status=True),),
    columns=_columns,
)
