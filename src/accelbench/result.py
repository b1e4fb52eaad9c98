"""The result record: one per cell, with its spec and environment inside, failed cells too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from accelbench.energy import EnergyMetrics
from accelbench.environment import Environment
from accelbench.spec import Frozen, RunSpec, stable_hash
from accelbench.stats import Summary

Status = Literal["ok", "diverged", "not-converged", "oom", "error", "timeout", "interrupted"]
"""ok: measured; diverged: measured, but the loss became NaN or infinite (or, in time-to-train,
ran away), so the throughput is not a valid result; not-converged: time-to-train measured, but the
budget ended before the target; oom: out of memory; error: the cell failed (see reason);
timeout: killed after its time limit; interrupted: stopped by SIGTERM or Ctrl-C (a sweep run
again runs it again)."""
Outcome = Literal["reached", "not-converged", "diverged"]
MEASURED: tuple[Status, ...] = ("ok", "diverged", "not-converged")
"""Statuses whose result holds metrics."""


class EpochMetrics(Frozen):
    index: int
    num_steps: int
    num_items: int
    time_s: float
    """Wall time of the epoch, from its first batch request to the device finishing its last step."""
    items_per_s: float
    loss_last: float
    loss_mean: float


class Flops(Frozen):
    per_item: float
    """FLOPs of one item in the scenario's pass (forward and backward when training, forward
    when inferring), counted once by torch's FlopCounterMode on a real micro-batch (matmuls,
    convolutions and attention; elementwise work is not counted)."""
    peak_per_s: float
    """The device's dense peak in the run's precision."""
    peak_source: str
    """"datasheet: <link>", or "measured: <how>" for a device not in efficiency.PEAKS."""
    num_devices: int = 1
    """Devices the run used (its replicas); MFU divides by this many peaks."""


class RankMetrics(Frozen):
    """One data-parallel replica's own view of the steady state."""

    rank: int
    hostname: str
    local_rank: int
    numa_node: int | None
    """The NUMA node this rank's CPUs belong to; None if they span several."""
    items_per_s: float
    """This rank's micro batches per second of its own steady step time, in items."""
    step_ms_median: float
    input_wait_frac: float
    peak_mem_allocated_gib: float | None
    host_peak_rss_gib: float


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


class TrainMetrics(Frozen):
    """What a cell measured, step by step. A step is an optimizer step when training, and one
    batch answered when inferring (spec.scenario), whose step times are then latencies."""

    item_unit: str
    items_per_step: int
    """Global batch: micro batch x accumulation x replicas."""
    timer: Literal["device-events", "wall-clock"]
    """How step times were taken: device events on the stream, or the host clock on the CPU."""
    epochs: list[EpochMetrics]
    step_ms: list[float]
    """Raw time of every optimizer step, all epochs in order."""
    loss: list[float]
    """Raw loss of every optimizer step (NaN and infinity kept as they were)."""
    steady_from_step: int
    """Index of the first step counted as steady state: the start of epoch 2, or step 1 of a
    one-epoch run. Steps before it hold compilation and warm-up."""
    step_ms_steady: Summary
    window_items_per_s: Summary
    """Throughput of consecutive windows of spec.window_steps steady-state steps."""
    ci_met: bool | None = None
    """Whether the median's 95% interval reached spec.ci_pct (None: no target was set)."""
    input_wait_ms: list[float] = Field(default_factory=list)
    """Raw host time each optimizer step waited for its batches from the loader."""
    input_wait_frac: float | None = None
    """Share of steady-state step time spent waiting for input (None in records made before it
    was measured). Near 0: the device is the limit; large: the host's input pipeline is."""
    compute_items_per_s: float | None = None
    """Steady-state throughput with the input wait taken out, an estimate of what the device
    could do with input for free (NVIDIA DeepLearningExamples' compute_ips)."""
    first_step_ms: float
    """Time to the end of the first step, compilation and the first batch included."""
    diverged_at_step: int | None
    peak_mem_allocated_gib: float | None
    peak_mem_reserved_gib: float | None
    host_peak_rss_gib: float
    build_s: float
    """Model, optimizer and data set up before the first step."""
    measure_s: float
    """All epochs, end to end."""
    energy: EnergyMetrics | None = None
    """Energy over the steady epochs (all of a one-epoch run), and how it was measured."""
    joules_per_item: float | None = None
    flops: Flops | None = None
    server: ServerMetrics | None = None
    """The server scenario's rates, after the back-to-back batches above measured capacity."""
    time_to_train: TimeToTrain | None = None
    """The time-to-train scenario's outcome; its epochs above are the intervals between
    evaluations."""
    ranks: list[RankMetrics] = Field(default_factory=list)
    """Per-replica figures of a data-parallel run, in rank order (empty for one replica). The
    run's own step times are each step's slowest rank, as the replicas wait for it."""

    @property
    def items_per_s(self) -> float:
        """Steady-state throughput: the median window."""
        return self.window_items_per_s.median

    @property
    def flops_per_s(self) -> float | None:
        """Achieved model FLOP/s at the steady-state throughput, over all replicas."""
        return self.flops.per_item * self.items_per_s if self.flops else None

    @property
    def mfu(self) -> float | None:
        """Model FLOP utilisation: achieved over the peak FLOP/s of all devices used (see
        flops.peak_source)."""
        if self.flops is None:
            return None
        return (
            self.flops.per_item
            * self.items_per_s
            / (self.flops.peak_per_s * self.flops.num_devices)
        )


class Result(Frozen):
    key: str
    """Stable hash of spec and platform fingerprint: the same cell on the same platform."""
    spec: RunSpec
    env: Environment
    status: Status
    reason: str | None = None
    """One line saying why, for any status but ok."""
    detail: str | None = None
    """The end of the traceback or of the child's output, for failures."""
    metrics: TrainMetrics | None = None
    created_at: datetime
    wall_s: float | None = None
    """The whole cell as its launcher saw it: process start, imports, set-up and measurement."""

    @classmethod
    def new(
        cls,
        spec: RunSpec,
        env: Environment,
        status: Status,
        *,
        reason: str | None = None,
        detail: str | None = None,
        metrics: TrainMetrics | None = None,
    ) -> Result:
        """A result made now, keyed by its spec and platform."""
        return cls(
            key=result_key(spec, env), spec=spec, env=env, status=status, reason=reason,
            detail=detail, metrics=metrics, created_at=datetime.now(UTC),
        )  # fmt: skip

    @property
    def overhead_s(self) -> float | None:
        """Cell time outside the measured epochs (process start, imports, model build)."""
        if self.wall_s is None or self.metrics is None:
            return None
        return self.wall_s - self.metrics.measure_s

    @property
    def items_per_s(self) -> float | None:
        return self.metrics.items_per_s if self.metrics else None

    @property
    def num_devices(self) -> int:
        """Devices the cell ran on: replicas x pipeline stages."""
        return self.spec.num_processes


def measured(results: Sequence[Result], *scenarios: str) -> list[Result]:
    """The results of these scenarios that hold metrics."""
    return [
        r for r in results if r.spec.scenario in scenarios and r.status in MEASURED and r.metrics
    ]


def result_key(spec: RunSpec, env: Environment) -> str:
    return stable_hash(spec.identity(), env.fingerprint())
