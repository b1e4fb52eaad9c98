from __future__ import annotations

import pytest
import torch

from accelbench import workloads
from accelbench.cell import runner
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result, result_key
from accelbench.workload import Workload
from accelbench.workloads import toy

from ..conftest import tiny


def _failing(exc: BaseException) -> Workload:
    def build() -> torch.nn.Module:
        raise exc

    base = toy.tiny_mlp()
    return Workload("samples", build, base.make_sample, base.loss)


def test_ok_result_carries_spec_env_and_key() -> None:
    result = runner.run(tiny())
    assert result.status == "ok" and result.reason is None
    assert result.env.device_type == "cpu"
    assert result.key == result_key(result.spec, result.env)
    assert Result.model_validate_json(result.model_dump_json()) == result


def test_auto_device_is_resolved_in_the_record() -> None:
    assert runner.run(tiny(device="auto")).spec.device == "cpu"


def test_diverged_run_keeps_its_metrics() -> None:
    result = runner.run(tiny(lr=1e9, steps_per_epoch=5))
    assert result.status == "diverged"
    assert result.metrics is not None
    assert f"at step {result.metrics.diverged_at_step}" in (result.reason or "")
    # NaN survives the trip through JSON, so the stored record says what happened
    again = Result.model_validate_json(result.model_dump_json())
    assert (
        again.metrics is not None
        and again.metrics.diverged_at_step == result.metrics.diverged_at_step
    )


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB"), "oom"),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory"), "oom"),
        (ValueError("bad config"), "error"),
    ],
)
def test_failures_become_statuses(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, status: str
) -> None:
    monkeypatch.setitem(workloads.WORKLOADS, "tiny_mlp", lambda: _failing(exc))
    result = runner.run(tiny())
    assert result.status == status
    assert result.metrics is None
    assert result.reason is not None and type(exc).__name__ in result.reason
    assert result.detail is not None and "Traceback" in result.detail


def test_a_precision_the_device_cannot_run_raises() -> None:
    with pytest.raises(AccelbenchError, match="tf32 cannot run"):
        runner.run(tiny(precision="tf32"))
