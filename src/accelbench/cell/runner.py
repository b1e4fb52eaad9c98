"""Run one spec in this process and turn whatever happens into a Result."""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Callable

from accelbench import engines, scenarios, workloads
from accelbench.cell.environment import capture, resolve_device
from accelbench.errors import AccelbenchError, is_oom, missing_extra, one_line
from accelbench.execution import distributed, interruption, progress
from accelbench.execution.precision import global_settings, set_cudnn_benchmark
from accelbench.records import contention
from accelbench.records.environment import Environment
from accelbench.records.metrics import Metrics
from accelbench.records.precision import check_supported
from accelbench.records.result import Result, Status
from accelbench.records.spec import RunSpec

log = logging.getLogger(__name__)


def run(spec: RunSpec) -> Result:
    """Measure `spec` here and now, as one rank of it when it has several replicas. Failures of
    the workload become the result's status; a spec this platform cannot run at all (no such
    device, unsupported precision) raises instead."""
    scenario = scenarios.get(spec.scenario)
    cpus = os.cpu_count() or 1
    free = int(os.environ.get(contention.FREE_CPUS_ENV) or cpus)  # as the sweep found them
    device = resolve_device(spec.device)
    client = isinstance(scenario, scenarios.ClientScenario)
    threads = None if client else contention.auto_threads(spec, device, free, cpus)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)  # before capture, which records it
    env = capture(spec.device, hidden=(spec.knob("api_key_env") or "",))
    spec = spec.model_copy(update={"device": env.device_type})
    if isinstance(
        scenario, scenarios.ClientScenario
    ):  # a server: nothing to build, place or set here
        return _result(spec, env, lambda: scenario.measure_fn()(spec))
    engine = engines.get(spec.framework)
    if engine.measures:  # another framework's engine: its own measure, and its own collectives
        # Replicas also join torch's group on gloo, over which the kit gathers their records.
        distributed.join(spec, "cpu")
        return _result(spec, env, lambda: _left(engine.measure_fn(spec.scenario)(spec)))
    check_supported(spec.precision, env.device_type, env.cuda_capability)
    rank = distributed.join(spec, env.device_type)

    def on_device() -> Metrics:
        alone = isinstance(scenario, scenarios.DeviceScenario)  # no model: the device by itself
        progress.phase("measuring the device" if alone else "building the model")
        device = distributed.device_of(rank, env.device_type)
        if isinstance(scenario, scenarios.DeviceScenario):
            metrics = scenario.measure_fn()(spec, device)
        else:
            workload = workloads.get(spec.workload, spec.model_args)
            set_cudnn_benchmark(spec.cudnn_benchmark, workload.fixed_shapes)
            metrics = scenario.measure_fn()(spec, workload, device)
        distributed.leave()
        return metrics.model_copy(update={"torch_settings": global_settings()})

    return _result(spec, env, on_device)


def _left(metrics: Metrics) -> Metrics:
    distributed.leave()
    return metrics


def _result(spec: RunSpec, env: Environment, measure: Callable[[], Metrics]) -> Result:
    """The result of a measurement, whatever happens in it (a scenario's code that cannot be
    imported included)."""
    status: Status = "ok"
    reason = detail = None
    metrics = None
    try:
        metrics = measure()
        ended = metrics.record.status() if metrics.record else None
        if interruption.requested() and len(metrics.epochs) < spec.epochs:
            status = "interrupted"
            reason = f"{len(metrics.epochs)} of {spec.epochs} epochs measured, kept"
        elif ended is not None:
            status, reason = ended
        elif metrics.diverged_at_step is not None:
            status = "diverged"
            reason = f"loss became {metrics.loss[metrics.diverged_at_step]} at step {metrics.diverged_at_step}"
    except AccelbenchError as exc:  # the workload refused this configuration: say why
        status, reason = "error", str(exc)
    except Exception as exc:  # the workload failed: that is a result, not a crash of the sweep
        status = "oom" if is_oom(exc) else "error"
        reason = missing_extra(exc) or one_line(exc)
        detail = "".join(traceback.format_exception(exc)[-8:])
        log.warning("%s failed: %s", spec.workload, reason)
    return Result.new(spec, env, status, reason=reason, detail=detail, metrics=metrics)
