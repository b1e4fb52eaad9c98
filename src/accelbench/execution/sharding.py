"""Sharding a model over devices with torch.distributed's own tools: tensor parallelism
(parallelize_module) within a replica and FSDP2 (fully_shard) across replicas, on a 2-D device
mesh of replicas x tensor_parallel, as torchtitan composes them.

Runs inside each rank, after distributed.join. Where a model keeps its blocks and how its
layers split come from the model itself (transformers' `_no_split_modules` and
`base_model_tp_plan`), so any transformers model that publishes them shards without a line here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelbench.errors import AccelbenchError
from accelbench.records.precision import PRECISIONS
from accelbench.records.spec import RunSpec

if TYPE_CHECKING:
    import torch
    from torch.distributed.device_mesh import DeviceMesh


def layout(spec: RunSpec) -> str:
    """The sharding in words, for the record: 'fsdp over 2 x tp 2', 'tp+sp 2' (sequence
    parallel), 'ddp 4', 'none'."""
    parts = []
    if spec.fsdp:
        parts.append(f"fsdp over {spec.replicas}" + (" (offload)" if spec.fsdp_offload else ""))
    elif spec.replicas > 1:
        parts.append(f"ddp {spec.replicas}")
    if spec.tensor_parallel > 1:
        parts.append(f"tp{'+sp' if spec.sequence_parallel else ''} {spec.tensor_parallel}")
    return " x ".join(parts) or "none"


def mesh(spec: RunSpec, device_type: str) -> DeviceMesh:
    """The (dp, tp) mesh over every rank: ranks next to each other share a replica's tensor
    parallel group, as NVLink neighbours should."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(
        device_type, (spec.replicas, spec.tensor_parallel), mesh_dim_names=("dp", "tp")
    )


def shard(model: torch.nn.Module, spec: RunSpec, device: torch.device) -> torch.nn.Module:
    """The model split by tensor parallelism, compiled block by block (with --compile), then
    sharded by FSDP, in place: torchtitan's order, which keeps FSDP's gathers outside the
    compiled graphs."""
    ranks = mesh(spec, device.type)
    if spec.tensor_parallel > 1:
        tensor_parallel(model, spec, ranks["tp"])
    if spec.compile:
        for block in blocks(model) or [model]:  # a model without blocks compiles whole
            block.compile(mode=spec.compile_mode)
    if spec.fsdp:
        fully_shard(model, spec, ranks["dp"])
    return model


def sharded(spec: RunSpec) -> bool:
    """Whether sharding.shard lays the model out (and compiles it, block by block)."""
    return spec.fsdp or spec.tensor_parallel > 1


def tensor_parallel(model: torch.nn.Module, spec: RunSpec, tp: DeviceMesh) -> None:
    """Split each layer named in the model's tensor-parallel plan: column-wise layers keep a
    slice of output features (attention heads, MLP hidden units) on each device, row-wise layers
    sum their partial outputs. The embeddings, norms and output head stay whole on every device;
    with spec.sequence_parallel the norms and the activations between blocks are split along
    the sequence instead (sequence_plan)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        ParallelStyle,
        RowwiseParallel,
        parallelize_module,
    )

    plan = tensor_plan(model, spec.workload, tp.size())
    rowwise = (
        RowwiseParallel(output_layouts=Shard(1), use_local_output=False)  # reduce-scatter
        if spec.sequence_parallel
        else RowwiseParallel()
    )
    styles: dict[str, ParallelStyle] = {
        path: ColwiseParallel() if style == "colwise" else rowwise for path, style in plan.items()
    }
    base = base_of(model)
    if spec.sequence_parallel:
        styles |= sequence_plan(base, plan, spec.workload)
        for path in {path.rpartition(".")[0] for path, style in plan.items() if style == "rowwise"}:
            for part in _matching(base, path):
                part.register_forward_pre_hook(_gather_sequence, with_kwargs=True)
    parallelize_module(base, tp, styles)


def sequence_plan(base: torch.nn.Module, plan: dict[str, str], name: str) -> dict[str, Any]:
    """Megatron's sequence parallelism on a transformers model (Korthikanti et al. 2022): the
    embedding's output is cut along the sequence, every norm in the blocks runs on its device's
    part (SequenceParallel), each block's attention and MLP gather the sequence once before
    their column-wise layers (_gather_sequence) and their row-wise layers reduce-scatter back
    (in tensor_parallel); the final norm gathers it whole for the head. Raises, naming the fix,
    for a model without that shape."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        PrepareModuleInput,
        PrepareModuleOutput,
        SequenceParallel,
    )

    blocks_path = next(iter(plan)).split(".*.")[0]  # "layers" of "layers.*.self_attn.q_proj"
    get_embedding = getattr(base, "get_input_embeddings", None)
    embedding = get_embedding() if callable(get_embedding) else None
    children = dict(base.named_children())
    embed = next((n for n, m in children.items() if m is embedding), None)
    final = [n for n, m in children.items() if "Norm" in type(m).__name__]
    block = base.get_submodule(f"{blocks_path}.0") if blocks_path in children else None
    norms = [n for n, m in (block.named_children() if block else []) if "Norm" in type(m).__name__]
    if embed is None or len(final) != 1 or not norms:
        raise AccelbenchError(
            f"{name} is not shaped for sequence parallelism (an embedding, norms in its blocks "
            "and one final norm, as Llama has): leave out --sequence-parallel"
        )
    return {
        embed: PrepareModuleOutput(
            output_layouts=Replicate(), desired_output_layouts=Shard(1), use_local_output=False
        ),
        **{f"{blocks_path}.*.{n}": SequenceParallel() for n in norms},
        final[0]: PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_output=True
        ),
    }


def _gather_sequence(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Before a block's attention or MLP: its hidden states, cut along the sequence, gathered
    whole in one all-gather (whether passed by position or, as transformers passes attention's,
    by name), for the column-wise layers that follow."""
    from torch.distributed.tensor import DTensor, Replicate

    def whole(x: Any) -> Any:
        return x.redistribute(placements=[Replicate()]).to_local() if isinstance(x, DTensor) else x

    if args:
        args = (whole(args[0]), *args[1:])
    if "hidden_states" in kwargs:
        kwargs = kwargs | {"hidden_states": whole(kwargs["hidden_states"])}
    return args, kwargs


def base_of(model: torch.nn.Module) -> torch.nn.Module:
    """The model without its head: what transformers' plans name paths from."""
    prefix = getattr(model, "base_model_prefix", "")
    return getattr(model, prefix) if prefix and hasattr(model, prefix) else model


def _matching(base: torch.nn.Module, pattern: str) -> list[torch.nn.Module]:
    """The submodules a plan's path pattern ("layers.*.mlp") names."""
    import fnmatch

    return [m for n, m in base.named_modules() if fnmatch.fnmatchcase(n, pattern)]


TP_STYLES = ("colwise", "rowwise")
"""The plan entries accelbench applies (ColwiseParallel, RowwiseParallel)."""


def tensor_plan(model: torch.nn.Module, name: str, size: int) -> dict[str, str]:
    """The model's tensor-parallel plan (module path pattern to style), after checking that
    accelbench can apply it over `size` devices; raises, naming the fix, where it cannot.
    Works on a model built on the meta device, so pre-flight checks it before any cell."""
    config = getattr(model, "config", None)
    plan: dict[str, str] | None = getattr(config, "base_model_tp_plan", None)
    if not plan:
        raise AccelbenchError(
            f"{name} publishes no tensor-parallel plan (transformers models such as Llama do): "
            "leave out --tensor-parallel"
        )
    # A mixture of experts: transformers 5.25 moved its experts out of the tensor plan.
    if getattr(config, "base_model_ep_plan", None):
        raise AccelbenchError(
            f"{name}'s experts are split by expert parallelism, which accelbench does not apply "
            "yet: leave out --tensor-parallel"
        )
    unknown = sorted({style for style in plan.values() if style not in TP_STYLES})
    if unknown:
        raise AccelbenchError(
            f"{name}'s tensor-parallel plan uses {', '.join(unknown)}, which accelbench does not "
            "apply yet: leave out --tensor-parallel"
        )
    for field in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
        value = getattr(config, field, None)
        if isinstance(value, int) and value % size:
            raise AccelbenchError(
                f"{name} has {field} {value}, which {size} devices cannot split evenly: give "
                f"--tensor-parallel a divisor of {value}"
            )
    return plan


def fully_shard(model: torch.nn.Module, spec: RunSpec, dp: DeviceMesh) -> None:
    """FSDP2 on each block the model names as indivisible, then on the whole model (which holds
    the embeddings and head), so one block's weights are gathered at a time."""
    import torch
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy
    from torch.distributed.fsdp import fully_shard as shard_module

    policy = MixedPrecisionPolicy()
    if uses_mixed_policy(spec):  # as torchtitan trains: bf16 weights in compute, fp32 reduction
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    offload = CPUOffloadPolicy() if spec.fsdp_offload else OffloadPolicy()
    for module in [*blocks(model), model]:
        shard_module(module, mesh=dp, mp_policy=policy, offload_policy=offload)


def blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks: the modules of the classes transformers marks as not to be
    split (`_no_split_modules`: decoder layers), else timm's `blocks`; none for other models,
    which are then sharded as one unit."""
    kinds = set(getattr(model, "_no_split_modules", None) or ())
    if kinds:  # by class or base class: FSDP renames a block's class to FSDP<name>
        return [m for m in model.modules() if kinds & {c.__name__ for c in type(m).__mro__}]
    found = getattr(model, "blocks", None)
    return list(found) if found is not None and hasattr(found, "__iter__") else []


def uses_mixed_policy(spec: RunSpec) -> bool:
    """Whether FSDP casts the weights itself (amp-bf16 under --fsdp), in place of autocast."""
    info = PRECISIONS[spec.precision]
    return spec.fsdp and info.autocast_dtype == "bfloat16" and info.param_dtype == "float32"


def state_gib(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> float:
    """GiB of weights and optimizer state this process holds: its own shards under FSDP and
    tensor parallelism, all of them otherwise. What sharding divides, counted alike on every
    device (the CPU keeps no allocator peak)."""
    import torch
    from torch.distributed.tensor import DTensor

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if isinstance(t, DTensor) else t

    tensors = list(model.parameters()) + [
        value
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    ]
    return sum(local(t).numel() * t.element_size() for t in tensors) / 2**30


def fewest_for_state(spec: RunSpec, memory_gib: float | None) -> tuple[int, str]:
    """The fewest replicas whose devices can hold the model's weights, gradients and optimizer
    state sharded over them, activations aside (a lower bound for the fewest-devices search),
    and that bound in words. The count is of weights, built on the meta device: nothing is
    allocated."""
    import math

    import torch

    from accelbench import workloads

    with torch.device("meta"):
        model = workloads.get(spec.workload, spec.model_args).build_model()
    weights = sum(p.numel() for p in model.parameters())
    master = 4 if PRECISIONS[spec.precision].param_dtype == "float32" else 2
    optimizer = (2 if spec.optimizer == "adamw" else 1) * master  # Adam's moments; momentum
    per_weight = 2 * master + optimizer  # weights, gradients, optimizer state
    need_gib = weights * per_weight / 2**30
    count = f"{weights / 1e9:.3g}B" if weights >= 1e8 else f"{weights / 1e6:.3g}M"
    text = (
        f"{count} weights x {per_weight} bytes (weights, gradients, "
        f"{spec.optimizer} state) = {need_gib:,.1f} GiB before activations"
    )
    if memory_gib is None or spec.fsdp_offload:
        return 1, text
    fewest = max(1, math.ceil(need_gib / (memory_gib * spec.tensor_parallel)))
    return (
        fewest,
        f"{text}: at least {fewest} x {spec.tensor_parallel} device(s) of {memory_gib:g} GiB",
    )
