"""The fast path's knobs on the CPU: what each does to a run, what is recorded, what is refused.
Their CUDA effect (autotuned convolutions, CUDA graphs) needs a GPU: `make gpu-check`."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from accelbench import run
from accelbench.execution import data
from accelbench.report.cells import configuration
from accelbench.workload import Workload

from ..conftest import tiny


def test_every_global_torch_setting_is_recorded_with_the_run() -> None:
    result = run(tiny(cudnn_benchmark="on"))
    assert result.metrics is not None
    settings = result.metrics.torch_settings
    assert settings["cudnn.benchmark"] == "True"
    assert settings["cuda.matmul.fp32_precision"] == "ieee"  # fp32: TF32 off, and said so
    assert {"cudnn.deterministic", "float32_matmul_precision"} <= settings.keys()
    off = run(tiny(cudnn_benchmark="off")).metrics
    assert off is not None and off.torch_settings["cudnn.benchmark"] == "False"


def test_autotuning_is_off_by_default_where_shapes_vary(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelbench import workloads

    made = workloads.get("tiny_mlp")
    varying = Workload(**{**made.__dict__, "fixed_shapes": False})
    monkeypatch.setattr(workloads, "get", lambda name, args: varying)
    auto = run(tiny()).metrics
    assert auto is not None and auto.torch_settings["cudnn.benchmark"] == "False"
    monkeypatch.setattr(workloads, "get", lambda name, args: made)
    fixed = run(tiny()).metrics
    assert fixed is not None and fixed.torch_settings["cudnn.benchmark"] == "True"


def test_compile_mode_reaches_torch_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    modes: list[str] = []

    def compile_(model: torch.nn.Module, mode: str) -> torch.nn.Module:
        modes.append(mode)
        return model  # eager: what is under test is the mode handed over

    monkeypatch.setattr(torch, "compile", compile_)
    for scenario in ("train", "infer"):
        result = run(tiny(scenario=scenario, compile=True, compile_mode="max-autotune"))
        assert result.status == "ok", result.reason
    assert modes == ["max-autotune", "max-autotune"]
    assert configuration(result.spec) == "bs=4 fp32 +compile(max-autotune)"
    with pytest.raises(ValidationError, match="--compile-mode reduce-overhead goes with --compile"):
        tiny(compile_mode="reduce-overhead")


def test_device_input_makes_a_few_batches_once_and_cycles_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fetched: list[int] = []
    original = data.SyntheticDataset.__getitem__

    def counted(self: data.SyntheticDataset, index: int) -> dict[str, torch.Tensor]:
        fetched.append(index)
        return original(self, index)

    monkeypatch.setattr(data.SyntheticDataset, "__getitem__", counted)
    spec = tiny(steps_per_epoch=10, epochs=2, batch_size=4)
    host = run(spec)
    assert host.status == "ok" and len(fetched) >= 20 * 4  # every step's batch from the host
    fetched.clear()
    device = run(spec.model_copy(update={"inputs_on_device": True}))
    assert device.status == "ok" and device.metrics is not None
    assert len(fetched) <= (4 + 1) * 4  # four batches, and one to count FLOPs
    assert configuration(device.spec) == "bs=4 fp32 device-input"
    with pytest.raises(ValidationError, match="--inputs-on-device cycles a few synthetic"):
        tiny(inputs_on_device=True, data="sklearn:digits", workload="lenet5")
