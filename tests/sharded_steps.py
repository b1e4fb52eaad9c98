"""Run under torchrun by test_sharding.py: a few optimizer steps of a cell's engine on one fixed
global batch, each data-parallel rank taking its slice, and the global loss of every step
(with the weights and optimizer state this rank holds) written by rank 0 as JSON.

python -m torch.distributed.run --nproc-per-node N tests/sharded_steps.py SPEC_JSON OUT STEPS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from accelbench import distributed, workloads
from accelbench.engine import make_engine
from accelbench.spec import RunSpec


def main(spec_json: str, out: str, steps: int) -> None:
    spec = RunSpec.model_validate_json(spec_json)
    rank = distributed.join(spec, "cpu")
    workload = workloads.get(spec.workload, spec.model_args)
    torch.manual_seed(spec.seed)  # the same weights on every rank, as the train scenario does
    engine = make_engine(workload, spec, torch.device("cpu"))
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
    if rank.is_first:
        Path(out).write_text(json.dumps({"losses": losses, "held_gib": held}))
    distributed.leave()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
