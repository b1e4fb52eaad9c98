"""What the harness costs: accelbench's training loop against a minimal hand-written loop.

Both run the same workload, batch, precision, optimizer and DataLoader in this process,
alternating round by round so drifts in clock speed or load hit both alike. Each round times one
whole steady-state epoch (after a warm-up epoch) by the wall clock, synchronising the device at
its ends. The last line printed is the ratio of throughputs, accelbench / bare; 1.00 means no
cost. It also prints how the host's peak memory changes when the run is made 4x longer.

    python benchmarks/overhead.py --workload autoencoder --batch-size 32
    python benchmarks/overhead.py --workload tiny_mlp --batch-size 64 --steps 200   # worst case
    python benchmarks/overhead.py --quick    # seconds: what the test suite runs, so it cannot rot
"""

from __future__ import annotations

import statistics
import time

import torch
from _options import parse, parser  # benchmarks/, beside this script

from accelbench import workloads
from accelbench.execution import device as dev
from accelbench.execution.data import make_loader
from accelbench.execution.engine import TorchEngine
from accelbench.records.spec import RunSpec
from accelbench.scenarios.train import measure as train


def accelbench_rate(spec: RunSpec, device: torch.device) -> float:
    """accelbench's headline: the steady epoch's items over its seconds."""
    return train.measure(spec, workloads.get(spec.workload), device).items_per_s


def bare_rate(spec: RunSpec, device: torch.device) -> float:
    """The loop a person would write by hand, with the same model, optimizer and data."""
    torch.manual_seed(spec.seed)
    workload = workloads.get(spec.workload)
    engine = TorchEngine(workload, spec, device)  # builds model and optimizer the same way
    model, optimizer = engine.model, engine.optimizer
    loader = make_loader(workload, spec, pin_memory=device.type == "cuda")
    seconds = 0.0
    for _ in range(spec.epochs):
        dev.synchronize(device)
        start = time.perf_counter()
        for batch in loader:
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            loss = workload.loss(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        dev.synchronize(device)
        seconds = time.perf_counter() - start  # the last epoch, as for accelbench
    return spec.steps_per_epoch * spec.batch_size / seconds


def main() -> None:
    options = parser(__doc__, "autoencoder", 32)
    args, device = parse(options)
    spec = RunSpec(
        workload=args.workload,
        batch_size=args.batch_size,
        epochs=2,
        steps_per_epoch=args.steps,
        device=device.type,
    )  # fp32, SGD, no accumulation: the bare loop does exactly this
    ours, bare = [], []
    for round_index in range(args.rounds):
        if round_index % 2:  # ABBA order: neither loop always runs first
            bare.append(bare_rate(spec, device))
            ours.append(accelbench_rate(spec, device))
        else:
            ours.append(accelbench_rate(spec, device))
            bare.append(bare_rate(spec, device))
        print(f"round {round_index + 1}: accelbench {ours[-1]:,.1f}  bare {bare[-1]:,.1f} items/s")

    short = train.measure(spec, workloads.get(spec.workload), device).host_peak_rss_gib
    longer = spec.model_copy(update={"steps_per_epoch": 4 * spec.steps_per_epoch})
    long = train.measure(longer, workloads.get(spec.workload), device).host_peak_rss_gib
    print(
        f"host peak RSS: {short:.3f} GiB at {spec.steps_per_epoch} steps/epoch, "
        f"{long:.3f} GiB at {longer.steps_per_epoch} (growth {1024 * (long - short):+.1f} MiB)"
    )
    print(
        f"{args.workload} bs={args.batch_size} on {device.type}, median of {args.rounds} rounds: "
        f"accelbench {statistics.median(ours):,.1f}, bare {statistics.median(bare):,.1f} items/s"
    )
    print(f"ratio accelbench/bare: {statistics.median(ours) / statistics.median(bare):.3f}")


if __name__ == "__main__":
    main()
