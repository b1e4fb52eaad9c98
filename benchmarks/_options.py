"""The options every benchmark script shares, their quick mode (what the test suite runs), and
paired rounds."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

from accelbench.cell.environment import resolve_device
from accelbench.records.spec import RunSpec


def parser(
    doc: str, workload: str, batch_size: int, steps: int = 30, rounds: int = 6
) -> argparse.ArgumentParser:
    """--workload, --batch-size, --steps, --rounds, --device and --quick, with these defaults."""
    options = argparse.ArgumentParser(description=doc.splitlines()[0])
    options.add_argument("--workload", default=workload)
    options.add_argument("--batch-size", type=int, default=batch_size)
    options.add_argument("--steps", type=int, default=steps, help="optimizer steps per epoch")
    options.add_argument("--rounds", type=int, default=rounds)
    options.add_argument("--device", default="auto")
    options.add_argument("--quick", action="store_true", help="tiny_mlp, 1 round of 10 steps")
    return options


def parse(options: argparse.ArgumentParser) -> tuple[argparse.Namespace, torch.device]:
    """The arguments, quick mode applied, and the device they name."""
    args = options.parse_args()
    if args.quick:
        args.workload, args.batch_size, args.steps, args.rounds = "tiny_mlp", 16, 10, 1
    return args, torch.device(resolve_device(args.device))


def spec(args: argparse.Namespace, device: torch.device, **fields: object) -> RunSpec:
    """The cell the arguments name: two epochs (a warm-up and the one timed) of --steps each,
    exactly (none added for a short steady state: the bare loop times the same steps), with
    `fields` besides."""
    return RunSpec.model_validate(
        {
            "workload": args.workload,
            "batch_size": args.batch_size,
            "epochs": 2,
            "steps_per_epoch": args.steps,
            "min_steady_s": 0.0,
            "device": device.type,
        }
        | fields
    )


def paired_ratios(
    ours: Callable[[], float], bare: Callable[[], float], rounds: int, label: str
) -> list[float]:
    """ours() / bare() per round, alternating which runs first (ABBA) so that drifts in clock
    speed or load hit both alike, after one unrecorded call of each: a process's first
    measurement runs slower (7-43% here), and is discarded on both sides alike."""
    ours(), bare()
    ratios = []
    for round_index in range(rounds):
        if round_index % 2:
            b, o = bare(), ours()
        else:
            o, b = ours(), bare()
        ratios.append(o / b)
        print(f"  {label} round {round_index + 1}: accelbench {o:,.2f}  bare {b:,.2f}")
    return ratios


def print_ratios(cell: str, ratios: list[float]) -> None:
    """The paired rounds' median ratio of accelbench to bare with its range, for `cell` (in
    words), and last the line the test suite reads."""
    median = statistics.median(ratios)
    print(
        f"{cell}: accelbench/bare median of {len(ratios)} paired rounds {median:.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(f"ratio accelbench/bare: {median:.3f}")
