"""Run by test_sharding.py, under torchrun: a few optimizer steps of a cell's engine on one fixed
global batch, each data-parallel rank taking its slice, and the global loss of every step
(with the weights and optimizer state each rank holds, and how many blocks were compiled)
written by rank 0 as JSON; for each of several cells of the same number of processes in turn,
in one process group (a launch each cost 8 s of CPU here, importing torch).

python tests/sharded_steps.py N JOBS_JSON STEPS (N: torchrun's ranks, 0 without torchrun;
JOBS_JSON: a file of [[SPEC, OUT], ...])
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from accelbench import workloads
from accelbench.execution import distributed, sharding
from accelbench.execution.engine import TorchEngine
from accelbench.records.spec import RunSpec


def main(jobs_json: str, steps: int) -> None:
    for spec_json, out in json.loads(Path(jobs_json).read_text()):
        run(RunSpec.model_validate(spec_json), out, steps)
    distributed.leave()


def run(spec: RunSpec, out: str, steps: int) -> None:
    rank = distributed.join(spec, "cpu")  # the group of the first, kept for the next
    workload = workloads.get(spec.workload, spec.model_args)
    torch.manual_seed(spec.seed)  # the same weights on every rank, as the train scenario does
    engine = TorchEngine(workload, spec, torch.device("cpu"))
    # One global batch, the same however many ranks, learnt step after step: the loss falls.
    gen = torch.Generator().manual_seed(1234)
    samples = [workload.make_sample(gen) for _ in range(spec.global_batch)]
    replica = distributed.data_index(spec)
    share = spec.batch_size * spec.grad_accum
    mine = samples[replica * share : (replica + 1) * share]
    micro = [mine[i : i + spec.batch_size] for i in range(0, share, spec.batch_size)]
    batches = [{k: torch.stack([s[k] for s in m]) for k in m[0]} for m in micro]
    losses = []
    for _ in range(steps):
        loss = engine.step(batches).detach()
        if dist.is_initialized():  # the global batch's mean: each replica's mean, averaged
            dist.all_reduce(loss)
            loss /= dist.get_world_size()  # tensor-parallel ranks hold their replica's loss
        losses.append(loss.item())
    held = distributed.gather(engine.held_gib())
    compiled = [b for b in sharding.blocks(engine.eager) if b._compiled_call_impl is not None]
    if rank.is_first:
        record = {"losses": losses, "held_gib": held, "compiled_blocks": len(compiled)}
        Path(out).write_text(json.dumps(record))


def launch(nproc: int, args: list[str]) -> None:
    """torchrun over `nproc` ranks, forked from this process as accelbench's are (launch.py):
    with this file's imports and the optimizer's lazy one done, which each rank would
    otherwise import again."""
    import torch._dynamo  # noqa: F401
    from torch.distributed.run import main as torchrun

    fork = ["--run-path", "--start-method", "fork", str(Path(__file__).resolve())]
    torchrun(["--standalone", "--nproc-per-node", str(nproc), *fork, str(nproc), *args])


if __name__ == "__main__":
    nproc, *args = sys.argv[1:]
    if int(nproc) and "RANK" not in os.environ:
        launch(int(nproc), args)
    else:
        main(args[0], int(args[1]))
