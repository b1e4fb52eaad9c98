"""The micro plug-in: what the core reads of the micro scenario (its rules, headline, lines and
columns)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from accelbench.scenarios.base import (
    DeviceScenario,
    Headline,
    Namer,
    record_of,
    steady_rate,
)
from accelbench.scenarios.micro import DTYPES, MIN_STEP_S, MicroMetrics
from accelbench.workloads import COLLECTIVES, MICRO

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


def headline(result: Result) -> Headline | None:
    """Calls per second over the steady state, times the work of a call."""
    rate, micro = steady_rate(result), record_of(result, MicroMetrics)
    if rate is None or micro is None:
        return None
    scale, unit = micro.per_call
    low_high = (
        None if rate.interval is None else (rate.interval[0] * scale, rate.interval[1] * scale)
    )
    return Headline(rate.value * scale, unit, low_high)


def _rules(spec: RunSpec) -> None:
    kind = spec.workload.removeprefix("micro/")
    if kind == spec.workload:
        raise ValueError(f"--scenario micro measures micro/KIND, KIND one of {', '.join(MICRO)}")
    if spec.fsdp or spec.tensor_parallel > 1 or spec.pipeline_stages > 1:
        raise ValueError(
            "micro measures the device: leave out --fsdp, --tensor-parallel and --pipeline-stages"
        )
    if kind in COLLECTIVES and spec.replicas < 2:
        raise ValueError(f"{spec.workload}: a collective needs --replicas 2 or more")
    if kind not in COLLECTIVES and spec.replicas > 1:
        raise ValueError(f"{spec.workload} measures one device: leave out --replicas")
    if spec.precision not in DTYPES:
        raise ValueError(
            f"micro runs in one dtype: give --precision {', '.join(DTYPES)}, not {spec.precision}"
        )
    if spec.data is not None or spec.workers:
        raise ValueError(
            "micro measures the device with its own buffers: leave out --data and --workers"
        )
    sizes = {k: v for k, v in spec.model_args.items() if k in ("n", "m", "k", "mib", "bytes")}
    if any(not isinstance(v, int) or v < 1 for v in sizes.values()):
        raise ValueError(f"{spec.workload}: sizes are whole numbers of at least 1, not {sizes}")
    if spec.model_args.get("direction", "h2d") not in ("h2d", "d2h"):
        raise ValueError("micro/copy: give --model-arg direction=h2d or direction=d2h")


def _device_rules(spec: RunSpec, device_type: str) -> None:
    if spec.workload == "micro/copy" and device_type == "cpu":
        raise ValueError("micro/copy measures host-device copies: run it on an accelerator")


def _lines(result: Result, name: Namer) -> list[str]:
    micro, found = record_of(result, MicroMetrics), result.headline
    if micro is None or found is None:
        return []
    line = f"{name(result.spec)}: {micro.measure} {micro.shape}: {found.value:,.4g} {found.unit}"
    if micro.calls_per_step and micro.calls_per_step != result.spec.batch_size:
        line += f" ({micro.calls_per_step} calls a step: {1e3 * MIN_STEP_S:g} ms or more)"
    if micro.bus_factor:
        line += f" bus bandwidth, {found.value / micro.bus_factor:,.4g} GB/s algorithm bandwidth"
    if micro.datasheet_per_s:
        scale, unit = (1e12, "TFLOP/s") if micro.flops_per_call else (1e9, "GB/s")
        what = "dense" if micro.flops_per_call else "memory bandwidth,"
        line += (
            f", {100 * found.value * scale / micro.datasheet_per_s:.0f}% of the datasheet's "
            f"{what} {micro.datasheet_per_s / scale:,g} {unit} ({micro.datasheet_source})"
        )
    return [line]


def _columns(result: Result) -> Mapping[str, object]:
    micro = record_of(result, MicroMetrics)
    if micro is None:
        return {}
    return {"micro_shape": micro.shape, "micro_datasheet_per_s": micro.datasheet_per_s}


SCENARIO = DeviceScenario(
    name="micro",
    summary="the device by itself: matmul TFLOP/s, memory triad GB/s, host-device copy GB/s",
    measure="accelbench.scenarios.micro.measure:measure",
    distributes=True,
    workloads=("micro/matmul", "micro/triad"),  # what every device runs: arithmetic, memory
    rules=_rules,
    device_rules=_device_rules,
    record=MicroMetrics,
    headline=headline,
    steps_rate=True,
    notes=_lines,
    columns=_columns,
)
