"""How one optimizer step executes on a device stack, behind one small interface.

A scenario only calls `Engine.step`. The torch engine covers eager mode and torch.compile on any
torch device; a stack whose runtime owns the model, optimizer and device loop (PopTorch on
Graphcore IPUs, for one) becomes one new module with the same method.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable
from typing import Protocol

import torch

from accelbench.errors import AccelbenchError
from accelbench.execution import distributed, lora, sharding
from accelbench.execution.optim import make_optimizer, make_schedule, to_device
from accelbench.execution.precision import to_float8, torch_settings
from accelbench.records.spec import RunSpec
from accelbench.workload import Batch, Workload


class Engine(Protocol):
    trainable: int
    """Weights the optimizer steps: all, or a LoRA run's adapters."""

    def step(self, micro_batches: Iterable[Batch]) -> torch.Tensor:
        """One optimizer step over host micro-batches; returns their mean loss as a device
        tensor, without waiting for the device."""
        ...

    def count_flops(self, micro_batch: Batch) -> float | None:
        """FLOPs of one forward and backward pass over a micro-batch (None if the stack cannot
        count them). Leaves the weights as they were."""
        ...

    def held_gib(self) -> float:
        """Weights and optimizer state this process holds (sharding.state_gib)."""
        ...

    def expert_load(self, micro_batch: Batch) -> list[float] | None:
        """A mixture of experts' routing of one micro-batch (language.expert_load); None for a
        dense model or where the whole model is not in this process."""
        ...

    def to_device(self, batch: Batch) -> Batch:
        """A host batch as `step` feeds it to the model (device, dtype, memory format), so that
        a batch kept on the device costs `step` no copy."""
        ...


class TorchEngine:
    """Eager or compiled PyTorch on one device, in any precision of precision.PRECISIONS."""

    def __init__(self, workload: Workload, spec: RunSpec, device: torch.device) -> None:
        self.settings = torch_settings(spec.precision)
        self.device = device
        self.dtype = self.settings.param_dtype
        self.memory_format = torch.channels_last if spec.channels_last else torch.contiguous_format
        self.grad_accum = spec.grad_accum
        self.loss_fn = workload.loss

        model = workload.build_model().to(device=device, dtype=self.dtype)
        if spec.lora_rank is not None:
            model = lora.adapt(model, spec)
        self.trainable = lora.trainable(model)
        """Weights the optimizer steps: all, or a LoRA run's adapters."""
        if spec.precision == "fp8":
            to_float8(model)
        if spec.recompute:
            _recompute(model, spec.workload)
        model = model.to(memory_format=self.memory_format)
        model.train()
        self.eager = model
        # Before the optimizer: sharding replaces the parameters it must hold.
        self.replicated = distributed.wrap(model, spec, device)
        self.fsdp = spec.fsdp
        if sharding.uses_mixed_policy(spec):  # FSDP casts the weights: no autocast on top
            self.settings = dataclasses.replace(self.settings, autocast_dtype=None)
        self.optimizer = make_optimizer(spec, model, device)
        self.warmup = make_schedule(spec, self.optimizer)
        # torch.compile returns a callable with the module's interface; a sharded model's
        # blocks are compiled already.
        self.model: torch.nn.Module = (
            torch.compile(self.replicated, mode=spec.compile_mode)  # type: ignore[assignment]
            if spec.compile and not sharding.sharded(spec)
            else self.replicated
        )
        self.scaler = torch.amp.GradScaler(device.type) if self.settings.grad_scaler else None

    def step(self, micro_batches: Iterable[Batch]) -> torch.Tensor:
        total: torch.Tensor | None = None
        micro_batches = list(micro_batches)
        for index, host_batch in enumerate(micro_batches):
            batch = self.to_device(host_batch)
            # Replicas exchange gradients once per optimizer step, after its last micro-batch.
            with self._no_sync(last=index == len(micro_batches) - 1):
                with self._autocast():
                    loss = self.loss_fn(self.model, batch)
                    if self.grad_accum > 1:
                        loss = loss / self.grad_accum
                (self.scaler.scale(loss) if self.scaler else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.warmup:
            self.warmup.step()
        assert total is not None, "a step needs at least one micro-batch"
        return total

    def evaluate(
        self,
        batches: Iterable[Batch],
        correct: Callable[[torch.nn.Module, Batch], torch.Tensor] | None,
    ) -> tuple[float, float | None]:
        """Mean loss over host batches, and the share of items `correct` counts right (None
        without it), in eval mode without gradients; the weights are left as they were."""
        loss_sum = right = torch.zeros((), device=self.device)
        items = 0
        self.eager.eval()
        with torch.inference_mode(), self._autocast():
            for host_batch in batches:
                batch = self.to_device(host_batch)
                n = len(next(iter(batch.values())))
                loss_sum = loss_sum + self.loss_fn(self.eager, batch).float() * n
                if correct is not None:
                    right = right + correct(self.eager, batch)
                items += n
        self.eager.train()
        accuracy = right.item() / items if correct is not None else None
        return loss_sum.item() / items, accuracy

    def count_flops(self, micro_batch: Batch) -> float | None:
        from accelbench.execution.efficiency import flop_counter

        batch = self.to_device(micro_batch)
        with flop_counter() as counter, self._autocast():
            self.loss_fn(self.eager, batch).backward()
        self.optimizer.zero_grad(set_to_none=True)
        return float(counter.get_total_flops())

    def held_gib(self) -> float:
        return sharding.state_gib(self.eager, self.optimizer)

    def expert_load(self, micro_batch: Batch) -> list[float] | None:
        from accelbench.workloads.experts import expert_load

        with self._autocast():
            return expert_load(self.eager, self.to_device(micro_batch))

    def to_device(self, batch: Batch) -> Batch:
        return {
            k: to_device(v, self.device, self.dtype, self.memory_format) for k, v in batch.items()
        }

    def _no_sync(self, last: bool) -> contextlib.AbstractContextManager[object]:
        if self.fsdp:  # reduce-scatter the gradients after the last micro-batch only
            self.eager.set_requires_gradient_sync(last)  # type: ignore[operator]
            return contextlib.nullcontext()
        if last or self.replicated is self.eager:
            return contextlib.nullcontext()
        return self.replicated.no_sync()  # type: ignore[operator]

    def _autocast(self) -> contextlib.AbstractContextManager[object]:
        return self.settings.autocast(self.device.type)


def make_engine(workload: Workload, spec: RunSpec, device: torch.device) -> Engine:
    """The engine for this device and layout: torch on one device (with data-parallel replicas
    or not), or one stage of a pipeline."""
    if spec.pipeline_stages > 1:
        from accelbench.execution.pipeline import PipelineEngine

        return PipelineEngine(workload, spec, device)
    return TorchEngine(workload, spec, device)


def _recompute(model: torch.nn.Module, name: str) -> None:
    """Turn on the model's own activation checkpointing, which knows where its blocks are."""
    try:
        if hasattr(model, "set_grad_checkpointing"):  # timm
            model.set_grad_checkpointing(True)  # type: ignore[operator]
            return
        if getattr(model, "supports_gradient_checkpointing", False):  # transformers
            model.gradient_checkpointing_enable({"use_reentrant": False})  # type: ignore[operator]
            return
    except (AssertionError, NotImplementedError):  # timm models without it assert so
        pass
    raise AccelbenchError(
        f"{name} has no activation checkpointing (timm and transformers models have): "
        "leave out --recompute"
    )
