"""The sub-records of the scenarios beyond training's steps: the server's rates, time to train's
evaluations and outcome, generation's token timings. result.TrainMetrics holds one of them."""

from __future__ import annotations

from typing import Literal

from accelbench.frozen import Frozen
from accelbench.stats import Summary

Outcome = Literal["reached", "not-converged", "diverged"]


class ServerTrial(Frozen):
    """Queries sent at one target rate."""

    target_per_s: float
    achieved_per_s: float
    """Queries answered per second, from the first arrival to the last answer."""
    latency_ms: list[float]
    """Raw latency of every query, from its arrival to its batch's answer, in arrival order."""
    latency: Summary
    mean_batch: float
    """Queries per batch the dynamic batcher sent, on average."""


class ServerMetrics(Frozen):
    """The server scenario: the rates tried and the one reported."""

    latency_bound_ms: float | None
    trials: list[ServerTrial]
    reported: int | None
    """Index of the trial reported: the given rate's, or the highest rate whose p99 kept within
    the bound (None: no rate tried kept within it)."""
    search: str
    """How the rates were chosen, in words."""

    @property
    def sustained_per_s(self) -> float | None:
        """Queries answered per second at the reported rate; None where no rate was sustained."""
        return None if self.reported is None else self.trials[self.reported].achieved_per_s


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


class TimeToTrain(Frozen):
    """The time-to-train scenario: how long training took to reach a held-out target."""

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


class GenerateMetrics(Frozen):
    """The generate scenario's token timings (scenarios/generate.py)."""

    prompt_tokens: int
    new_tokens: int
    token_ms: list[list[float]]
    """Raw: for every call, in order, the time from the call to each new token's arrival on the
    host, ms; the summaries below are of the steady calls'."""
    ttft_ms: Summary
    """Time to first token: the call to its first token (the prefill and one decode step)."""
    tpot_ms: Summary
    """Time per output token after the first: (E2EL - TTFT) / (new tokens - 1), per call."""
    itl_ms: Summary
    """Inter-token latency: every gap between consecutive tokens of a call."""
    e2el_ms: Summary
    """End-to-end latency: the call to its last token."""
    prefill_tokens_per_s: float
    """Prompt tokens of a batch over the median TTFT: the prefill's rate."""
