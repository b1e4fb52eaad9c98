"""Run one spec in this process and turn whatever happens into a Result."""

from __future__ import annotations

import logging
import traceback

from accelbench import distributed, environment, interruption, scenarios, workloads
from accelbench.errors import AccelbenchError, is_oom, missing_extra, one_line
from accelbench.precision import check_supported, global_settings, set_cudnn_benchmark
from accelbench.result import Result, Status
from accelbench.spec import RunSpec

log = logging.getLogger(__name__)


def run(spec: RunSpec) -> Result:
    """Measure `spec` here and now, as one rank of it when it has several replicas. Failures of
    the workload become the result's status; a spec this platform cannot run at all (no such
    device, unsupported precision) raises instead."""
    if spec.threads is not None:
        import torch

        torch.set_num_threads(spec.threads)  # before capture, which records it
    env = environment.capture(spec.device)
    spec = spec.model_copy(update={"device": env.device_type})
    check_supported(spec.precision, env.device_type, env.cuda_capability)
    rank = distributed.join(spec, env.device_type)
    status: Status = "ok"
    reason = detail = None
    metrics = None
    try:
        workload = workloads.get(spec.workload, spec.model_args)
        set_cudnn_benchmark(spec.cudnn_benchmark, workload.fixed_shapes)
        metrics = scenarios.get(spec.scenario)(
            spec, workload, distributed.device_of(rank, env.device_type)
        )
        metrics = metrics.model_copy(update={"torch_settings": global_settings()})
        distributed.leave()
        ttt = metrics.time_to_train
        if interruption.requested() and len(metrics.epochs) < spec.epochs:
            status = "interrupted"
            reason = f"{len(metrics.epochs)} of {spec.epochs} epochs measured, kept"
        elif ttt is not None and ttt.outcome != "reached":
            status, reason = ttt.outcome, ttt.reason
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
