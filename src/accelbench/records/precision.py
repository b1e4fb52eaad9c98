"""The precisions a run can use: what each one sets, and where it can run."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from accelbench.errors import AccelbenchError

if TYPE_CHECKING:
    import torch

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


@dataclass(frozen=True)
class TorchSettings:
    """A precision as torch takes it (precision.torch_settings)."""

    param_dtype: torch.dtype
    autocast_dtype: torch.dtype | None
    grad_scaler: bool

    def autocast(self, device_type: str) -> contextlib.AbstractContextManager[object]:
        import torch

        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type, dtype=self.autocast_dtype)


def torch_settings(name: Precision) -> TorchSettings:
    """Apply the precision's global torch setting (TF32 on or off) and return its dtypes: the one
    place the torch engine, the pipeline engine and the inference forward take a precision from."""
    import torch

    info = PRECISIONS[name]
    set_tf32(info.tf32)
    return TorchSettings(
        param_dtype=getattr(torch, info.param_dtype),
        autocast_dtype=getattr(torch, info.autocast_dtype) if info.autocast_dtype else None,
        grad_scaler=info.grad_scaler,
    )


def to_float8(model: torch.nn.Module) -> None:
    """Swap the model's Linear layers for torchao's Float8Linear, in place, before sharding and
    compilation (torchtitan's order); the output head and layers whose sizes are not multiples
    of 16 (float8 matmuls' constraint) stay as they are."""
    try:
        from torchao.float8 import convert_to_float8_training
    except ImportError:
        raise AccelbenchError(
            "precision fp8 needs torchao: pip install 'accelbench[float8]'"
        ) from None
    import torch

    def eligible(module: torch.nn.Module, fqn: str) -> bool:
        return (
            isinstance(module, torch.nn.Linear)
            and module.in_features % 16 == 0
            and module.out_features % 16 == 0
            and fqn.rpartition(".")[2] not in ("lm_head", "output", "head")
        )

    convert_to_float8_training(model, module_filter_fn=eligible)


def set_tf32(enabled: bool) -> None:
    import torch

    # Set both ways on purpose: cuDNN convolutions default to TF32, so fp32 must turn it off.
    mode = "tf32" if enabled else "ieee"
    # The legacy flag first: left at its default it disagrees with the new per-op flags, and
    # torch then refuses code that still reads it (torch.backends.cudnn.flags(), used by
    # transformers' CTC loss).
    torch.backends.cudnn.allow_tf32 = enabled
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.conv.fp32_precision = mode  # type: ignore[attr-defined]
    torch.backends.cudnn.rnn.fp32_precision = mode  # type: ignore[attr-defined]


def set_cudnn_benchmark(mode: str, fixed_shapes: bool) -> None:
    """cuDNN autotuning per the spec's cudnn_benchmark: auto turns it on for fixed shapes."""
    import torch

    torch.backends.cudnn.benchmark = mode == "on" or (mode == "auto" and fixed_shapes)


def global_settings() -> dict[str, str]:
    """The process-wide torch settings that change speed or numbers, as they stand."""
    import torch

    return {
        "cudnn.benchmark": str(torch.backends.cudnn.benchmark),
        "cudnn.deterministic": str(torch.backends.cudnn.deterministic),
        "cudnn.allow_tf32": str(torch.backends.cudnn.allow_tf32),
        "cuda.matmul.fp32_precision": torch.backends.cuda.matmul.fp32_precision,
        "cudnn.conv.fp32_precision": torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": str(torch.are_deterministic_algorithms_enabled()),
    }
