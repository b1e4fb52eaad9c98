"""The precisions a run can use: what each one sets, and where it can run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from accelbench.errors import AccelbenchError

Precision = Literal["fp32", "tf32", "amp-fp16", "amp-bf16", "bf16", "fp16", "int8-dynamic", "fp8"]


@dataclass(frozen=True)
class PrecisionInfo:
    description: str
    param_dtype: Literal["float32", "bfloat16", "float16"]
    """Dtype of weights and floating inputs."""
    autocast_dtype: Literal["bfloat16", "float16"] | None
    """torch.autocast dtype, or None for no autocast."""
    grad_scaler: bool
    """Loss scaling (torch.amp.GradScaler), needed for fp16 gradients to stay representable."""
    tf32: bool
    """Allow TF32 tensor-core math for float32 matmuls and convolutions (NVIDIA Ampere and newer)."""
    device_types: frozenset[str]
    min_cuda_capability: tuple[int, int] | None = None
    inference_only: bool = False
    training_only: bool = False


_ALL = frozenset({"cpu", "cuda", "xpu", "mps"})
_AMPERE = (8, 0)  # bfloat16 and TF32 tensor cores
_ADA = (8, 9)  # float8 tensor cores (L4, L40S; H100 is 9.0)

PRECISIONS: dict[str, PrecisionInfo] = {
    "fp32": PrecisionInfo(
        "IEEE float32 everywhere (TF32 disabled)",
        param_dtype="float32",
        autocast_dtype=None,
        grad_scaler=False,
        tf32=False,
        device_types=_ALL,
    ),
    "tf32": PrecisionInfo(
        "float32 weights, TF32 tensor-core matmuls and convolutions",
        param_dtype="float32",
        autocast_dtype=None,
        grad_scaler=False,
        tf32=True,
        device_types=frozenset({"cuda"}),
        min_cuda_capability=_AMPERE,
    ),
    "amp-fp16": PrecisionInfo(
        "float32 weights, float16 autocast, dynamic loss scaling",
        param_dtype="float32",
        autocast_dtype="float16",
        grad_scaler=True,
        tf32=False,
        device_types=_ALL,
    ),
    "amp-bf16": PrecisionInfo(
        "float32 weights, bfloat16 autocast",
        param_dtype="float32",
        autocast_dtype="bfloat16",
        grad_scaler=False,
        tf32=False,
        device_types=frozenset({"cpu", "cuda", "xpu"}),
        min_cuda_capability=_AMPERE,
    ),
    "bf16": PrecisionInfo(
        "bfloat16 weights and activations",
        param_dtype="bfloat16",
        autocast_dtype=None,
        grad_scaler=False,
        tf32=False,
        device_types=frozenset({"cpu", "cuda", "xpu"}),
        min_cuda_capability=_AMPERE,
    ),
    "fp16": PrecisionInfo(
        "float16 weights and activations, no loss scaling",
        param_dtype="float16",
        autocast_dtype=None,
        grad_scaler=False,
        tf32=False,
        device_types=_ALL,
    ),
    "int8-dynamic": PrecisionInfo(
        "int8 weights of Linear and LSTM layers, activations quantised on the fly "
        "(torch.ao dynamic quantisation), the rest float32; inference on the CPU",
        param_dtype="float32",
        autocast_dtype=None,
        grad_scaler=False,
        tf32=False,
        device_types=frozenset({"cpu"}),
        inference_only=True,
    ),
    "fp8": PrecisionInfo(
        "float8 matmuls in the Linear layers (torchao's float8 training, dynamic tensor-wise "
        "scaling), bfloat16 autocast elsewhere, float32 weights",
        param_dtype="float32",
        autocast_dtype="bfloat16",
        grad_scaler=False,
        tf32=False,
        device_types=frozenset({"cuda"}),
        min_cuda_capability=_ADA,
        training_only=True,
    ),
}


def runs_on(precision: str, device_type: str, cuda_capability: tuple[int, int] | None) -> bool:
    """Whether `precision` can run on this device (capability None: not known, so allowed)."""
    info = PRECISIONS[precision]
    if device_type not in info.device_types:
        return False
    needed = info.min_cuda_capability if device_type == "cuda" else None
    return needed is None or cuda_capability is None or cuda_capability >= needed


def check_supported(
    precision: str, device_type: str, cuda_capability: tuple[int, int] | None
) -> None:
    """Raise AccelbenchError, naming the precisions that do run, when `precision` cannot."""
    if runs_on(precision, device_type, cuda_capability):
        return
    usable = [p for p in PRECISIONS if runs_on(p, device_type, cuda_capability)]
    needed = PRECISIONS[precision].min_cuda_capability
    why = (
        f" (needs compute capability {needed[0]}.{needed[1]}+)"
        if device_type == "cuda" and needed
        else ""
    )
    raise AccelbenchError(
        f"precision {precision} cannot run on this {device_type} device{why}; "
        f"use one of: {', '.join(usable)}"
    )
