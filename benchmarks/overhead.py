"""What the harness costs: accelbench's training loop against a minimal hand-written loop.

Both run the same workload, batch, precision, optimizer and DataLoader in this process,
alternating round by round (ABBA) so drifts in clock speed or load hit both alike, in fp32 and
in a mixed precision (autocast to bf16). Each round times one whole steady-state epoch (after a
warm-up epoch) by the wall clock, synchronising the device at its ends. One round of each, not
recorded, comes first: a process's first measurement runs slower (7-43% here), and it is
discarded on both sides alike. Each round gives a paired ratio, accelbench / bare (1.00: no
cost); printed are their median and range per precision, and last the lower of the two medians.
It also prints how the host's peak memory changes when the run is made 4x longer.

    python benchmarks/overhead.py --workload autoencoder --batch-size 32
    python benchmarks/overhead.py --workload tiny_mlp --batch-size 64 --steps 200   # worst case
    python benchmarks/overhead.py --quick    # seconds: what the test suite runs, so it cannot rot

The default (autoencoder, 4 rounds of 10 steps a precision) takes a few minutes on 2 cores.
"""

from __future__ import annotations

import statistics
import time
from functools import partial

import torch
from _options import paired_ratios, parse, parser  # benchmarks/, beside this script
from _options import spec as cell_of

from accelbench import workloads
from accelbench.execution import device as dev
from accelbench.execution.data import make_loader
from accelbench.execution.engine import TorchEngine
from accelbench.records.spec import RunSpec
from accelbench.scenarios.train import measure as train

PRECISIONS = ("fp32", "amp-bf16")


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
    mixed = spec.precision == "amp-bf16"
    seconds = 0.0
    for _ in range(spec.epochs):
        dev.synchronize(device)
        start = time.perf_counter()
        for batch in loader:
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=mixed):
                loss = workload.loss(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        dev.synchronize(device)
        seconds = time.perf_counter() - start  # the last epoch, as for accelbench
    return spec.steps_per_epoch * spec.batch_size / seconds


def main() -> None:
    options = parser(__doc__, "autoencoder", 32, steps=10, rounds=4)
    args, device = parse(options)
    spec = cell_of(args, device)  # SGD, no accumulation: the bare loop does exactly this
    medians = {}
    for precision in PRECISIONS:
        cell = spec.model_copy(update={"precision": precision})
        ours, bare = partial(accelbench_rate, cell, device), partial(bare_rate, cell, device)
        ratios = paired_ratios(ours, bare, args.rounds, precision)
        medians[precision] = statistics.median(ratios)
        print(
            f"{args.workload} bs={args.batch_size} {precision} on {device.type}: accelbench/bare "
            f"median of {len(ratios)} paired rounds {medians[precision]:.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f})"
        )

    short = train.measure(spec, workloads.get(spec.workload), device).host_peak_rss_gib
    longer = spec.model_copy(update={"steps_per_epoch": 4 * spec.steps_per_epoch})
    long = train.measure(longer, workloads.get(spec.workload), device).host_peak_rss_gib
    print(
        f"host peak RSS: {short:.3f} GiB at {spec.steps_per_epoch} steps/epoch, "
        f"{long:.3f} GiB at {longer.steps_per_epoch} (growth {1024 * (long - short):+.1f} MiB)"
    )
    print(f"ratio accelbench/bare: {min(medians.values()):.3f}")


if __name__ == "__main__":
    main()
