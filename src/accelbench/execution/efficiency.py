"""Model FLOP utilisation: FLOPs counted per step, against the device's peak FLOP/s.

The peak comes from the datasheet table below when the device is in it, else, on an accelerator,
from a matmul timed on the device in the cell's precision; MFU says which. Both are dense (no
structured sparsity). A CPU gets no peak and so no MFU: its peak depends on clocks, vector units
and threads, and one measured per cell varied from 30 to 80 GFLOP/s on one host.

A count is checked against a floor from the weights (flops_floor); an MFU above 100% or a count
below the floor is flagged implausible by validity, never shown as a valid figure.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from accelbench.records.precision import PRECISIONS, Precision
from accelbench.workload import Workload

if TYPE_CHECKING:  # torch is imported where it is used: the datasheets serve every engine
    import torch
    from torch.utils.flop_counter import FlopCounterMode

PeakClass = Literal["fp32", "tf32", "fp16", "bf16", "int8"]

PEAK_CLASS: dict[Precision, PeakClass] = {
    "fp32": "fp32",
    "tf32": "tf32",
    "amp-fp16": "fp16",
    "fp16": "fp16",
    "amp-bf16": "bf16",
    "bf16": "bf16",
    "int8-dynamic": "int8",
    "fp8": "bf16",
}
"""Which datasheet figure bounds each precision: the matmuls' input type. No int8 peak is in the
table or measured, so int8 runs have no MFU. fp8 runs are set against the bf16 peak, as
torchtitan reports them: MFU is not well defined for float8, and their TFLOP/s per device is the
figure to compare."""


@dataclass(frozen=True)
class DevicePeak:
    name_contains: str
    """Matched against the device name torch reports; the first entry that matches is used."""
    tflops: dict[PeakClass, float]
    """Dense peak TFLOP/s (tensor cores where the device has them; FP32 without)."""
    source: str


# Vendors print tensor-core figures "with sparsity"; the dense figure is half of it.
PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak(
        "H100 PCIe",
        {"fp32": 51, "tf32": 378, "fp16": 756, "bf16": 756},
        "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet",
    ),
    DevicePeak(
        "H100",
        {"fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5},
        "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet (SXM)",
    ),
    DevicePeak(
        "H200",
        {"fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5},
        "https://www.nvidia.com/en-us/data-center/h200/ (SXM)",
    ),
    DevicePeak(
        "A100",
        {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312},
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
    ),
    DevicePeak(
        "L4",
        {"fp32": 30.3, "tf32": 60, "fp16": 121, "bf16": 121},
        "https://www.nvidia.com/en-us/data-center/l4/",
    ),
    DevicePeak(
        "V100",
        {"fp32": 15.7, "fp16": 125},
        "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf (SXM2)",
    ),
    DevicePeak(
        "T4",
        {"fp32": 8.1, "fp16": 65},
        "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
    ),
    DevicePeak(
        "MI300X",
        {"fp32": 163.4, "tf32": 653.7, "fp16": 1307.4, "bf16": 1307.4},
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
    ),
)

MATMUL_SIZE = {"cpu": 1024}
"""Side of the square matmul timed for a measured peak; 8192 on accelerators."""
MATMUL_BUDGET_S = 0.5


def datasheet_peak(device_name: str, precision: Precision) -> tuple[float, str] | None:
    """(peak FLOP/s, source) from the table, or None if the device or precision is not in it."""
    for entry in PEAKS:
        if entry.name_contains.lower() in device_name.lower():
            value = entry.tflops.get(PEAK_CLASS[precision])
            return (value * 1e12, f"datasheet: {entry.source}") if value else None
    return None


@functools.cache
def measured_peak(
    device: torch.device, precision: Precision, budget_s: float = MATMUL_BUDGET_S
) -> tuple[float, str]:
    """(FLOP/s, how) of the fastest square matmul in the precision's input type, over pairs of
    matmuls repeated for `budget_s`: the best of many samples is what a busy host lets through
    least often, so it varies less from cell to cell than a short measurement."""
    import torch

    from accelbench.execution import device as dev

    info = PRECISIONS[precision]
    dtype = getattr(torch, info.autocast_dtype or info.param_dtype)
    n = MATMUL_SIZE.get(device.type, 8192)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up: kernel choice, caches
    best, samples, deadline = float("inf"), 0, time.perf_counter() + budget_s
    while samples < 4 or time.perf_counter() < deadline:
        dev.synchronize(device)
        start = time.perf_counter()
        a @ b
        a @ b
        dev.synchronize(device)
        best = min(best, (time.perf_counter() - start) / 2)
        samples += 1
    name = str(dtype).removeprefix("torch.")
    return 2 * n**3 / best, f"measured: best {n}x{n} {name} matmul on this device"


def flops_floor(workload: Workload, training: bool) -> float | None:
    """The fewest FLOPs one item's pass can take: each weight of a linear, convolution,
    attention or recurrent layer multiplies each item at least once (2 FLOPs), twice when
    training (forward, and its own gradient; the inputs' gradient is skipped where nothing
    upstream needs it, as for the first layer). Built on the meta device:
    no memory, no time. None for mixture-of-experts models, where an item meets only some
    experts, and for models that cannot be built there."""
    import torch

    weighted = (
        torch.nn.Linear,
        torch.nn.modules.conv._ConvNd,
        torch.nn.MultiheadAttention,
        torch.nn.RNNBase,
    )
    try:
        with torch.device("meta"):
            model = workload.build_model()
    except Exception:  # built from data or with host-side initialisation: no floor
        return None
    names = [name for name, _ in model.named_modules()]
    if any("expert" in name.lower() for name in names):
        return None
    weights = sum(
        p.numel()
        for module in model.modules()
        if isinstance(module, weighted)
        for name, p in module.named_parameters(recurse=False)
        if "bias" not in name
    )
    return 2.0 * weights * (2 if training else 1)


def flop_counter() -> FlopCounterMode:
    """torch's FlopCounterMode, with formulas for the CPU's fused attention kernels, which it
    has none of (every scaled_dot_product_attention on the CPU counted 0 FLOPs, half of a small
    encoder layer's), and for grouped-query attention on the GPU's, which torch before 2.12
    refuses ("query/key/value shapes are incompatible": no FLOPs for Llama 3 on an H100)."""
    import torch
    from torch.utils import flop_counter as fc

    def forward(q: Shape, k: Shape, v: Shape, *_: object, **__: object) -> int:
        return int(fc.sdpa_flop_count(q, *grouped(q, k, v)))

    def backward(grad: Shape, q: Shape, k: Shape, v: Shape, *_: object, **__: object) -> int:
        return int(fc.sdpa_backward_flop_count(grad, q, *grouped(q, k, v)))

    aten = torch.ops.aten
    kernels = ("flash_attention_for_cpu", "flash_attention", "efficient_attention")
    custom = {}  # the counter hands these the tensors' shapes, as its own formulas get
    for kernel in (*kernels, "cudnn_attention"):
        for op, formula in ((kernel, forward), (f"{kernel}_backward", backward)):
            if hasattr(aten, f"_scaled_dot_product_{op}"):
                custom[getattr(aten, f"_scaled_dot_product_{op}")] = formula
    return fc.FlopCounterMode(display=False, custom_mapping=custom)


def grouped(q: Shape, k: Shape, v: Shape) -> tuple[Shape, Shape]:
    """Key and value shapes with as many heads as the query's: grouped-query attention's
    kernels serve each key/value head to its group of query heads, and do the work of as many."""
    return (k[0], q[1], *k[2:]), (v[0], q[1], *v[2:])


Shape = tuple[int, ...]


@contextlib.contextmanager
def counter_sees_all() -> Iterator[None]:
    """Turn off the fused inference fast path of nn.MultiheadAttention and the transformer
    layers, whose single native op FlopCounterMode has no formula for (it counted 640 FLOPs per
    item for an encoder of 14.7M)."""
    import torch

    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)
