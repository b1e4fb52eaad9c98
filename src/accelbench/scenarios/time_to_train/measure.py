"""The time-to-train scenario: optimizer steps on real data until a held-out metric reaches its
target, as MLPerf Training scores a system (seed 003: "time to train balances information of
accuracy and throughput").

Training runs in epochs of spec.steps_per_epoch steps, each timed as the train scenario times
them; after each, the held-out split is evaluated on a clock of its own, so the training clock
holds optimizer steps only. The run ends at the first evaluation that
- meets the target: reached, at that training clock;
- follows a NaN or infinite loss, or a median loss since the last evaluation above
  spec.diverge_factor x the first step's: diverged. A spike that came back down by then does
  not stop the run, but the largest loss stays on record (seed 000's epoch-1 blow-ups);
- finds spec.max_steps or spec.max_measure_s of training spent: not-converged.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from accelbench import workloads
from accelbench.engines import Device
from accelbench.errors import AccelbenchError
from accelbench.execution import device as dev
from accelbench.execution.data import endless, split_loaders
from accelbench.execution.engine import TorchEngine
from accelbench.execution.meters.energy import EnergyMeter
from accelbench.execution.meters.host import HostMonitor
from accelbench.records.result import Metrics
from accelbench.records.spec import RunSpec
from accelbench.records.targets import parse_target
from accelbench.scenarios.epochs import Raw, build_metrics, count_flops
from accelbench.scenarios.time_to_train import EvalPoint, Outcome, TimeToTrain, TimeToTrainSettings
from accelbench.scenarios.train.measure import train_epoch
from accelbench.workload import Batch, Workload


def measure(spec: RunSpec, workload: Workload, device: torch.device) -> Metrics:
    _check_target(spec, workload)
    torch.manual_seed(spec.seed)
    start = time.perf_counter()
    engine = TorchEngine(workload, spec, device)
    train_loader, held_out = split_loaders(workload, spec, pin_memory=device.type == "cuda")
    build_s = time.perf_counter() - start

    timer = dev.StepTimer(device)
    losses = torch.empty(spec.steps_per_epoch, device=device)
    raw, batches = Raw(), endless(train_loader)
    num_train = len(train_loader.dataset)  # type: ignore[arg-type]
    run = to_target(
        spec,
        device,
        raw,
        lambda: train_epoch(spec, engine, batches, timer, losses, raw),
        lambda: engine.evaluate(held_out, workload.correct),
        num_train,
    )
    raw.peak_allocated, raw.peak_reserved = dev.peak_memory_gib(device)
    flops = count_flops(spec, workload, engine, next(iter(train_loader)), device)
    raw.host_rss = dev.host_peak_rss_gib()
    metrics = build_metrics(
        spec,
        workload,
        raw,
        [],
        timer=timer.method,
        build_s=build_s,
        flops=flops,
        metered_from_epoch=0,
    )
    num_held_out = len(held_out.dataset)  # type: ignore[arg-type]
    items = (num_train, num_held_out)
    record = run_record(spec, run.ended, run.curve, raw.step_loss, run.eval_s, items)
    return metrics.model_copy(update={"record": record})


def readable(spec: RunSpec) -> Workload:
    """The torch workload of the cell's name: the records (--data) and held-out split that
    another engine's run reads, as torch's does."""
    workload = workloads.get(spec.workload, spec.model_args)
    _check_target(spec, workload)
    return workload


def _check_target(spec: RunSpec, workload: Workload) -> None:
    target = TimeToTrainSettings.of(spec).target
    if target is not None and parse_target(target)[0] == "val_accuracy" and not workload.correct:
        raise AccelbenchError(f"{spec.workload} is not a classifier: give a val_loss target")


@dataclass
class Run:
    """How a run to its target went (to_target)."""

    curve: list[EvalPoint]
    ended: tuple[Outcome, str]
    eval_s: float


def to_target(
    spec: RunSpec,
    device: Device | torch.device,
    raw: Raw,
    epoch: Callable[[], None],
    evaluate: Callable[[], tuple[float, float | None]],
    num_train: int,
) -> Run:
    """Epochs until the run ends (outcome), any engine's: `epoch()` runs one epoch's steps, its
    step times and losses into raw; after each, `evaluate()` gives the held-out loss and accuracy
    on a clock of its own, left out of the training clock. Energy and the host's activity are
    metered over the whole run, evaluations included."""
    own = TimeToTrainSettings.of(spec)
    assert own.target is not None, "the spec requires a target for time-to-train"
    metric, op, goal = parse_target(own.target)
    if isinstance(device, torch.device):
        device = dev.TorchDevice(device)
    curve, eval_s = list[EvalPoint](), 0.0
    meter, monitor = EnergyMeter(device), HostMonitor(spec, device)
    device.reset_peak_memory()
    device.synchronize()
    measure_start = time.perf_counter()
    meter.start()
    monitor.start()
    while True:
        epoch_start = time.perf_counter()
        epoch()
        raw.epoch_s.append(time.perf_counter() - epoch_start)
        eval_start = time.perf_counter()
        val = evaluate()
        eval_s += time.perf_counter() - eval_start
        curve.append(eval_point(spec, raw.step_loss, sum(raw.epoch_s), num_train, val))
        ended = outcome(spec, raw.step_loss, curve[-1], metric, op, goal)
        if ended is not None:
            break
    raw.energy, raw.host = meter.stop(), monitor.stop()
    raw.measure_s = time.perf_counter() - measure_start
    return Run(curve, ended, eval_s)


def held_out_mean(
    batches: Iterable[Batch], summed: Callable[[Batch], tuple[Any, Any]], classifier: bool
) -> tuple[float, float | None]:
    """Mean loss over the held-out batches, and the share a classifier labels right (None for
    others), as torch's TorchEngine.evaluate gives them, from each batch's summed loss and the
    number it labels right (`summed`): another engine's evaluation."""
    total, right, items = 0.0, 0.0, 0
    for batch in batches:
        loss, correct = summed(batch)
        total, right = total + float(loss), right + float(correct)
        items += len(next(iter(batch.values())))
    return total / items, (right / items if classifier else None)


def run_record(
    spec: RunSpec,
    outcome: tuple[Outcome, str],
    curve: list[EvalPoint],
    step_loss: list[float],
    eval_s: float,
    items: tuple[int, int],
) -> TimeToTrain:
    """The scenario's record of a run that ended in `outcome` after its evaluations `curve`,
    over `items` (training, held-out): any engine's."""
    own = TimeToTrainSettings.of(spec)
    assert own.target is not None, "the spec requires a target for time-to-train"
    kind, reason = outcome
    reached = curve[-1] if kind == "reached" else None
    finite = [(loss, step) for step, loss in enumerate(step_loss) if math.isfinite(loss)]
    max_loss, max_step = max(finite, default=(math.nan, 0))
    return TimeToTrain(
        target=own.target,
        outcome=kind,
        reason=reason,
        time_to_target_s=reached.train_s if reached else None,
        steps_to_target=reached.step if reached else None,
        items_to_target=reached.num_items if reached else None,
        passes_to_target=reached.data_passes if reached else None,
        train_s=curve[-1].train_s,
        eval_s=eval_s,
        num_train_items=items[0],
        num_held_out_items=items[1],
        lr=spec.scaled_lr,
        lr_rule=lr_rule(spec),
        max_loss=max_loss,
        max_loss_step=max_step,
        curve=curve,
    )


def eval_point(
    spec: RunSpec,
    step_loss: list[float],
    train_s: float,
    num_train: int,
    val: tuple[float, float | None],
) -> EvalPoint:
    """An evaluation after the steps of `step_loss`, trained for `train_s`: its held-out loss
    and accuracy `val`, the training loss the median of the epoch's."""
    steps = len(step_loss)
    items = steps * spec.global_batch
    return EvalPoint(
        step=steps,
        train_s=train_s,
        num_items=items,
        data_passes=items / num_train,
        train_loss=statistics.median(step_loss[-spec.steps_per_epoch :]),
        val_loss=val[0],
        val_accuracy=val[1],
    )


def outcome(
    spec: RunSpec, step_loss: list[float], point: EvalPoint, metric: str, op: str, goal: float
) -> tuple[Outcome, str] | None:
    """(outcome, reason) once the run should end after this evaluation, else None."""
    own = TimeToTrainSettings.of(spec)
    bad = next((i for i, loss in enumerate(step_loss) if not math.isfinite(loss)), None)
    if bad is not None:
        return "diverged", f"loss became {step_loss[bad]} at step {bad}"
    if not math.isfinite(point.val_loss):
        return "diverged", f"held-out loss became {point.val_loss} at step {point.step}"
    limit = own.diverge_factor * step_loss[0]
    if point.train_loss > limit:
        return "diverged", (
            f"median loss {point.train_loss:.4g} before step {point.step} is above "
            f"{own.diverge_factor:g} x the first step's {step_loss[0]:.4g}"
        )
    value = point.val_loss if metric == "val_loss" else point.val_accuracy
    assert value is not None, "accuracy targets need a classifier, checked above"
    if value <= goal if op == "<=" else value >= goal:
        return "reached", f"{metric} {value:.4g} {op} {goal:g} at step {point.step}"
    if own.max_steps is not None and point.step >= own.max_steps:
        return "not-converged", (
            f"{metric} {value:.4g} after {point.step} steps, the --max-steps budget"
        )
    if point.train_s >= spec.max_measure_s:
        return "not-converged", (
            f"{metric} {value:.4g} after {point.train_s:.0f} s of training, the "
            "--max-measure-s budget"
        )
    return None


def lr_rule(spec: RunSpec) -> str:
    """How the learning rate was set, in words."""
    text = (
        f"linear scaling: {spec.lr:g} x {spec.global_batch}/{spec.lr_base_batch} = "
        f"{spec.scaled_lr:.4g}"
        if spec.lr_scaling == "linear"
        else f"fixed {spec.lr:g}"
    )
    return text + (f", linear warm-up over {spec.warmup_steps} steps" if spec.warmup_steps else "")
