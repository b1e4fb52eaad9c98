"""What a training step is made of on any engine: the optimizer, the learning-rate warm-up, and
host tensors put on the device in the model's dtype and memory format. The torch engine and the
pipeline engine both use it, so neither imports the other."""

from __future__ import annotations

import torch

from accelbench.records.spec import RunSpec


def to_device(
    tensor: torch.Tensor,
    device: torch.device,
    dtype: torch.dtype,
    memory_format: torch.memory_format = torch.contiguous_format,
) -> torch.Tensor:
    """A host tensor on the device; floating point in the model's dtype and memory format."""
    tensor = tensor.to(device, non_blocking=True)
    if not tensor.is_floating_point():
        return tensor
    if tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    if memory_format is torch.channels_last and tensor.dim() == 4:
        tensor = tensor.contiguous(memory_format=torch.channels_last)
    return tensor


def make_schedule(
    spec: RunSpec, optimizer: torch.optim.Optimizer
) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The linear learning-rate warm-up over spec.warmup_steps optimizer steps, if any."""
    if not spec.warmup_steps:
        return None
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / spec.warmup_steps)
    )


def make_optimizer(
    spec: RunSpec, model: torch.nn.Module, device: torch.device
) -> torch.optim.Optimizer:
    # Fused kernels on CUDA also take GradScaler's inf check on the device, which avoids its host
    # sync per step under amp-fp16.
    fused = True if device.type == "cuda" else None
    params = [p for p in model.parameters() if p.requires_grad]  # a LoRA run's adapters
    if spec.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=spec.scaled_lr, fused=fused)
    return torch.optim.SGD(params, lr=spec.scaled_lr, momentum=0.9, fused=fused)
