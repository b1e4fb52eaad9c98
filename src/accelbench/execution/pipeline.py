"""Pipeline parallelism: a workload split into stages on successive devices, one rank each,
fed micro-batches by torch.distributed.pipelining (GPipe or 1F1B).

Any workload can be split without knowing its code: the model and its loss are traced as one
module, and the split points are boundaries between the blocks of the model (a ResNet's stages,
a transformer's layers) where the forward FLOPs divide evenly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from accelbench.errors import AccelbenchError
from accelbench.execution import distributed, sharding
from accelbench.execution.efficiency import flop_counter
from accelbench.execution.optim import make_optimizer, make_schedule, to_device
from accelbench.execution.precision import torch_settings
from accelbench.records.spec import RunSpec
from accelbench.workload import Batch, Workload


class WithLoss(torch.nn.Module):
    """The model and its loss as one module of positional tensors, in `keys` order.

    Every input is copied first, in order: the tracer then keeps the inputs in that order, and
    stage 0 makes the copies and sends the ones later stages need (the labels) on with the
    activations. The loss is a 1-element tensor, as the schedule concatenates micro-batch outputs.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        loss: Callable[[torch.nn.Module, Batch], torch.Tensor],
        keys: list[str],
    ) -> None:
        super().__init__()
        self.model, self.loss, self.keys = model, loss, keys

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        batch = {k: t.clone() for k, t in zip(self.keys, tensors, strict=True)}
        return self.loss(self.model, batch).reshape(1)


def split_points(
    module: torch.nn.Module, example: tuple[torch.Tensor, ...], stages: int
) -> list[str]:
    """Names of the blocks that begin stages 2..`stages`: among the modules with at least two
    children per stage, take the one whose children do the most forward FLOPs (the model itself,
    a ResNet, or its chain of transformer layers), and begin a stage at each child where the
    running FLOPs cross another 1/stages of them."""
    with flop_counter() as counter, torch.no_grad():
        module(*example)
    flops = {
        name.partition(".")[2]: sum(ops.values()) for name, ops in counter.get_flop_counts().items()
    }
    chains = [(prefix, list(m.named_children())) for prefix, m in module.named_modules()]
    chains = [(p, children) for p, children in chains if len(children) >= 2 * stages]
    if not chains:
        raise AccelbenchError(
            f"found no chain of {2 * stages} blocks to split into {stages} stages"
        )

    def name(prefix: str, child: str) -> str:
        return f"{prefix}.{child}" if prefix else child

    prefix, children = max(chains, key=lambda c: sum(flops.get(name(c[0], n), 0) for n, _ in c[1]))
    cost = [flops.get(name(prefix, n), 0) for n, _ in children]
    total, running = sum(cost), 0
    points: list[str] = []
    for (child, _), c in zip(children, cost, strict=True):
        if running >= total * (len(points) + 1) / stages and len(points) < stages - 1:
            points.append(name(prefix, child))
        running += c
    if len(points) < stages - 1 or not total:
        raise AccelbenchError(f"{module.__class__.__name__} does not split into {stages} stages")
    return points


class PipelineEngine:
    """One stage of the pipeline on this rank's device; rank r holds stage r."""

    def __init__(self, workload: Workload, spec: RunSpec, device: torch.device) -> None:
        from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline

        settings = torch_settings(spec.precision)
        if settings.autocast_dtype or spec.compile or spec.channels_last:
            raise AccelbenchError(
                "pipeline stages run without autocast, torch.compile or channels-last so far: "
                "use --precision fp32, bf16 or fp16"
            )
        self.device, self.dtype = device, settings.param_dtype
        rank = distributed.index()
        self.first, self.last = rank == 0, rank == spec.pipeline_stages - 1
        gen = torch.Generator().manual_seed(spec.seed)
        samples = [workload.make_sample(gen) for _ in range(spec.batch_size)]
        self.keys = list(samples[0])
        example = tuple(
            to_device(torch.stack([s[k] for s in samples]), device, self.dtype) for k in self.keys
        )
        model = workload.build_model().to(device=device, dtype=self.dtype).train()
        self.trainable = sum(p.numel() for p in model.parameters())  # every stage's
        whole = WithLoss(model, workload.loss, self.keys)
        self.flops_per_micro_batch = _train_flops(whole, example)
        points = split_points(whole, example, spec.pipeline_stages)
        pipe = pipeline(
            whole, mb_args=example, split_spec=dict.fromkeys(points, SplitPoint.BEGINNING)
        )
        self.stage_names = points
        self.stage = pipe.build_stage(rank, device)
        self.optimizer = make_optimizer(spec, self.stage.submod, device)
        self.warmup = make_schedule(spec, self.optimizer)
        self.num_micro_batches = spec.grad_accum
        schedule = ScheduleGPipe if spec.pipeline_schedule == "gpipe" else Schedule1F1B
        # Each micro-batch's loss is scaled so that the gradients add up to the mean's, as with
        # gradient accumulation on one device.
        self.schedule = schedule(
            self.stage,
            n_microbatches=spec.grad_accum,
            loss_fn=lambda out, _: out.sum() / spec.grad_accum,
        )

    def step(self, micro_batches: Iterable[Batch]) -> torch.Tensor:
        batches = list(micro_batches)
        losses: list[torch.Tensor] = []
        if self.first:
            inputs = [
                to_device(torch.cat([b[k] for b in batches]), self.device, self.dtype)
                for k in self.keys
            ]
            self.schedule.step(*inputs)
        elif self.last:
            target = torch.zeros(
                self.num_micro_batches, device=self.device
            )  # unused: the loss is traced
            self.schedule.step(target=target, losses=losses)
        else:
            self.schedule.step()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.warmup:
            self.warmup.step()
        # Only the last stage sees the loss; the others report NaN, which the run's loss skips.
        return (
            torch.stack(losses).sum() if losses else torch.full((), torch.nan, device=self.device)
        )

    def count_flops(self, micro_batch: Batch) -> float | None:
        return self.flops_per_micro_batch

    def held_gib(self) -> float:
        return sharding.state_gib(self.stage.submod, self.optimizer)

    def expert_load(self, micro_batch: Batch) -> list[float] | None:
        return None  # a stage holds some layers: its routers see no whole forward

    def to_device(self, batch: Batch) -> Batch:
        return {k: to_device(v, self.device, self.dtype) for k, v in batch.items()}


def _train_flops(module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> float:
    """Forward and backward FLOPs of the whole model on one micro-batch, counted before it is
    split (the stages hold a part each); the gradients are dropped again."""
    with flop_counter() as counter:
        module(*example).sum().backward()
    module.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())
