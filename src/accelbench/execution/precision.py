"""How a precision is set up in torch: autocast and parameter dtypes (TorchSettings), TF32,
cuDNN's autotuner, float8 training (torchao), and the process-wide settings a record keeps. Which
precisions there are, and where each can run, is records.precision.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelbench.errors import AccelbenchError
from accelbench.records.precision import PRECISIONS, Precision

if TYPE_CHECKING:
    import torch


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
