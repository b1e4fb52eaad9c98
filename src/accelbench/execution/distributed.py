"""The rank side of data parallelism: joining the job torchrun started, wrapping the model,
and bringing every rank's raw measurements to rank 0.

launch.py starts the ranks; this module runs inside each of them. A cell with one replica runs
without a process group and every function here is then a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelbench.errors import AccelbenchError
from accelbench.execution import sharding
from accelbench.records.spec import RunSpec

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Rank:
    rank: int
    local_rank: int
    world_size: int

    @property
    def is_first(self) -> bool:
        return self.rank == 0


SINGLE = Rank(rank=0, local_rank=0, world_size=1)


def join(spec: RunSpec, device_type: str) -> Rank:
    """Join the process group torchrun set up for this cell (NCCL on CUDA, else gloo); SINGLE
    when the cell runs without one."""
    if not spec.distributed:
        return SINGLE
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size != spec.num_processes:
        raise AccelbenchError(
            f"the cell asks for {spec.num_processes} processes but runs in {world_size}: "
            "start it with `accelbench run`, which launches torchrun"
        )
    import torch
    import torch.distributed as dist

    rank = Rank(int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), world_size)
    if device_type == "cuda":
        torch.cuda.set_device(rank.local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return rank


def leave() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()  # no rank tears down while another's collectives are in flight
        dist.destroy_process_group()


def device_of(rank: Rank, device_type: str) -> torch.device:
    """This rank's device: accelerator `local_rank`, or the CPU."""
    import torch

    return (
        torch.device("cpu") if device_type == "cpu" else torch.device(device_type, rank.local_rank)
    )


def wrap(model: torch.nn.Module, spec: RunSpec, device: torch.device) -> torch.nn.Module:
    """The model sharded as the spec says (sharding.shard: FSDP, tensor parallel), else
    DistributedDataParallel over all replicas, with batch norm synchronised in groups of
    spec.bn_span replicas; the model itself for one replica."""
    if sharding.sharded(spec):
        return sharding.shard(model, spec, device)
    if spec.replicas == 1:
        return model
    import torch
    from torch.nn.parallel import DistributedDataParallel

    if spec.bn_span > 1:
        import torch.distributed as dist

        group, _ = dist.new_subgroups(group_size=spec.bn_span)
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group=group)
    device_ids = None if device.type == "cpu" else [device.index]
    return DistributedDataParallel(model, device_ids=device_ids)


def index() -> int:
    """This process's rank; 0 outside a data-parallel run."""
    import torch.distributed as dist

    return dist.get_rank() if dist.is_initialized() else 0


def data_index(spec: RunSpec) -> int:
    """Which replica's share of the data this process reads: the ranks of one tensor-parallel
    group (neighbours in the mesh, sharding.mesh) read the same batches."""
    return index() // spec.tensor_parallel


def local_index() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def rank_index() -> int:
    """This process's rank among the cell's (torchrun's RANK), 0 alone."""
    return int(os.environ.get("RANK", "0"))


def first_says(flag: bool) -> bool:
    """Rank 0's `flag` on every rank, for decisions the replicas must take together."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return flag
    box = [flag]
    dist.broadcast_object_list(box, src=0)
    return bool(box[0])


def gather(value: Any) -> list[Any]:
    """`value` from every rank, in rank order (JSON-able values only); [value] alone."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return [value]
    values: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def numa_node() -> int | None:
    """The NUMA node whose CPUs this process may run on, None if it may run on several nodes
    (or the host shows none)."""
    allowed = os.sched_getaffinity(0)
    nodes = {
        int(node.name.removeprefix("node"))
        for node in Path("/sys/devices/system/node").glob("node[0-9]*")
        if allowed & _cpu_list((node / "cpulist").read_text())
    }
    return nodes.pop() if len(nodes) == 1 else None


def _cpu_list(text: str) -> set[int]:
    """CPUs of a kernel cpulist such as '0-3,8-11'."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus
