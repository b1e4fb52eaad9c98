"""The time-to-train scenario: optimizer steps on real data until a held-out metric reaches its
target, evaluated after each epoch (measure.py); the record keeps the outcome and the curve."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from accelbench.records.frozen import Frozen
from accelbench.records.targets import parse_target
from accelbench.scenarios.base import Record, Series, Settings

if TYPE_CHECKING:
    from accelbench.records.result import Status

Outcome = Literal["reached", "not-converged", "diverged"]


class TimeToTrainSettings(Settings):
    target: str | None = None
    """time-to-train: the held-out metric to reach, such as "val_loss<=0.02" or
    "val_accuracy>=0.95" (accuracy for classifiers)."""
    max_steps: int | None = Field(default=None, gt=0)
    """time-to-train: stop as not-converged after this many optimizer steps (and, as always,
    after max_measure_s of training)."""
    diverge_factor: float = Field(default=10.0, gt=1)
    """time-to-train: stop as diverged when the median training loss between two evaluations
    exceeds this multiple of the first step's loss (NaN or infinity stops it at once)."""

    @field_validator("target")
    @classmethod
    def _target_form(cls, target: str | None) -> str | None:
        if target is not None:
            parse_target(target)
        return target


class EvalPoint(Frozen):
    """One evaluation of the held-out split in time-to-train."""

    step: int
    """Optimizer steps done."""
    train_s: float
    """The training clock: time in optimizer steps so far, evaluations left out."""
    num_items: int
    """Training items seen."""
    data_passes: float
    """Passes over the training split."""
    train_loss: float
    """Median training loss of the steps since the previous evaluation."""
    val_loss: float
    val_accuracy: float | None
    """Share of held-out items labelled right (classifiers only)."""


class TimeToTrain(Record):
    """The time-to-train scenario: how long training took to reach a held-out target."""

    kind: str = "time-to-train"
    target: str
    outcome: Outcome
    reason: str
    """What ended the run, in words."""
    time_to_target_s: float | None
    """The training clock at the first evaluation that met the target (None: not reached)."""
    steps_to_target: int | None
    items_to_target: int | None
    passes_to_target: float | None
    train_s: float
    """The training clock when the run ended."""
    eval_s: float
    """Time spent evaluating, outside the training clock."""
    num_train_items: int
    num_held_out_items: int
    lr: float
    """The learning rate reached after warm-up."""
    lr_rule: str
    """How lr was set, in words."""
    max_loss: float
    """Largest finite training loss of any step: a spike that recovered stays on record."""
    max_loss_step: int
    curve: list[EvalPoint]

    def status(self) -> tuple[Status, str] | None:
        return None if self.outcome == "reached" else (self.outcome, self.reason)

    def series(self) -> Mapping[str, Series]:
        found = self.time_to_target_s
        return {} if found is None else {"time_to_target": Series(found, "s")}
