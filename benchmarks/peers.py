"""accelbench against the loop a user would otherwise time: same model, batch, precision and
optimizer, the input already on the device (accelbench's --inputs-on-device, the peers' usual
way), alternating in one invocation so that drifts in clock or load hit both alike.

The peer is a torch.utils.benchmark Timer over a hand-written training step (blocked_autorange,
which synchronises CUDA and picks its own repetition count), as the PyTorch benchmarking recipe
does. Each round gives one rate per side; the lines printed are every round, each side's median
and run-to-run spread ((max - min) / median over the rounds), and last the ratio of the medians,
accelbench / peer: 1.00 means accelbench reports what the peer does, below it accelbench is
slower or its headline counts something the peer's leaves out (the peer times back-to-back steps
of one batch; accelbench's delivered rate counts everything between steps).

    python benchmarks/peers.py --workload resnet50 --batch-size 256 --precision amp-fp16
    python benchmarks/peers.py --quick    # seconds: what the test suite runs, so it cannot rot
"""

from __future__ import annotations

import statistics

import torch
import torch.utils.benchmark as benchmark
from _options import parse, parser  # benchmarks/, beside this script
from _options import spec as cell_of

from accelbench import workloads
from accelbench.execution.precision import torch_settings
from accelbench.records.spec import RunSpec
from accelbench.scenarios.train import measure as train


def accelbench_rate(spec: RunSpec, device: torch.device) -> float:
    """accelbench's headline, device-resident input: the steady state's delivered rate."""
    return train.measure(spec, workloads.get(spec.workload), device).items_per_s


def peer_rate(spec: RunSpec, device: torch.device, min_run_time: float) -> float:
    """A training step as a user writes it, timed by torch.utils.benchmark."""
    torch.manual_seed(spec.seed)
    workload = workloads.get(spec.workload)
    settings = torch_settings(spec.precision)
    model = workload.build_model().to(device=device, dtype=settings.param_dtype).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9)
    samples = [
        workload.make_sample(torch.Generator().manual_seed(i)) for i in range(spec.batch_size)
    ]
    batch = {
        k: torch.stack([s[k] for s in samples])
        .to(device)
        .to(settings.param_dtype if samples[0][k].is_floating_point() else samples[0][k].dtype)
        for k in samples[0]
    }
    scaler = torch.amp.GradScaler(device.type) if settings.grad_scaler else None

    def step() -> None:
        with settings.autocast(device.type):
            loss = workload.loss(model, batch)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):  # warm-up, as accelbench's first epoch
        step()
    # Timer runs on one thread unless told: the same threads as accelbench's run.
    timer = benchmark.Timer(
        stmt="step()", globals={"step": step}, num_threads=torch.get_num_threads()
    )
    return spec.batch_size / timer.blocked_autorange(min_run_time=min_run_time).median


def spread(rates: list[float]) -> float:
    return (max(rates) - min(rates)) / statistics.median(rates)


def main() -> None:
    options = parser(__doc__, "resnet50", 64)
    options.add_argument("--precision", default="fp32")
    args, device = parse(options)
    spec = cell_of(args, device, precision=args.precision, inputs_on_device=True)
    min_run_time = 0.2 if args.quick else 2.0
    ours, peer = [], []
    for round_index in range(args.rounds):
        pair = [lambda: ours.append(accelbench_rate(spec, device))]
        pair.append(lambda: peer.append(peer_rate(spec, device, min_run_time)))
        for run in pair if round_index % 2 == 0 else pair[::-1]:  # ABBA: neither always first
            run()
        print(f"round {round_index + 1}: accelbench {ours[-1]:,.1f}  peer {peer[-1]:,.1f} items/s")
    print(
        f"{args.workload} bs={args.batch_size} {args.precision} on {device.type}, median of "
        f"{args.rounds} rounds: accelbench {statistics.median(ours):,.1f} items/s (spread "
        f"{100 * spread(ours):.1f}%), torch.utils.benchmark {statistics.median(peer):,.1f} "
        f"items/s (spread {100 * spread(peer):.1f}%)"
    )
    print(f"ratio accelbench/peer: {statistics.median(ours) / statistics.median(peer):.3f}")


if __name__ == "__main__":
    main()
