"""What a cell costs beyond its own work, and how soon a `run` prints its first result: cells
(and their ranks) forked by the cell server and torchrun, against cells in fresh interpreters
(ACCELBENCH_FORK_SERVER=0).

Each round runs `accelbench run` as a user does, in a fresh process on a fresh database, once
with one cell and once with N cells, on both sides in turn. The time to a first result is the
one-cell command's wall time, start to exit. A cell's overhead is what each extra cell adds to
the wall time beyond its own measured epochs: (T(N) - T(1)) / (N - 1) - the mean of the cells'
epoch seconds. Medians over rounds, and the median of the rounds' paired ratios. Each round also
times `python -c "import torch"` beside them, the first result against what any torch program
pays before its first line of work; and a bare torch script that trains the same model for as
many steps and prints its last loss, the first result against what a hand-written loop costs
(its first optimizer imports torch._dynamo, as every torch optimizer does, 1 s here).

    python benchmarks/cells.py               # 3 rounds, 5 cells
    python benchmarks/cells.py --replicas 2  # cells of 2 ranks (torchrun's, forked or afresh)
    python benchmarks/cells.py --quick       # 1 round, 2 cells of 2 x 5 steps: the suite's run
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelbench.report.database import ResultStore

ACCELBENCH = [sys.executable, "-m", "accelbench"]
"""The command as a user runs it (accelbench.command: its cell server started first)."""
CELL = ["--epochs", "2", "--window-steps", "5", "--min-steady-s", "0", "--quiet"]
"""Exactly two epochs: what is timed is accelbench's cost around a cell, not its steady state."""
SIDES = {"server": "1", "fresh": "0"}


def import_torch_s() -> float:
    """Wall seconds of `python -c "import torch"`, start to exit."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, capture_output=True)
    return time.perf_counter() - start


BARE = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for _ in range({steps}):
    x, y = torch.randn(4, 64), torch.randint(0, 10, (4,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
"""
"""tiny_mlp (workloads/toy.py) trained by hand, at the one-cell run's batch."""


def bare_script_s(steps: int) -> float:
    """Wall seconds of BARE over `steps` steps, start to exit."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", BARE.format(steps=steps)], check=True, capture_output=True
    )
    return time.perf_counter() - start


def timed_run(
    batches: list[int], steps: int, device: str, fork_server: str, replicas: int = 1
) -> tuple[float, float]:
    """Wall seconds of one `accelbench run tiny_mlp` over these micro batches, and the mean of
    its cells' measured epoch seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp, "r.sqlite")
        batch_list = ",".join(map(str, batches))
        command = [*ACCELBENCH, "run", "tiny_mlp", *CELL, "--steps-per-epoch", str(steps)]
        command += ["--replicas", str(replicas)]
        command += ["--batch-size", batch_list, "--device", device, "--db", str(db)]
        env = os.environ | {"ACCELBENCH_FORK_SERVER": fork_server}
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        wall_s = time.perf_counter() - start
        with ResultStore(db) as store:  # read here: a process of its own took seconds
            epochs = [sum(e.time_s for e in r.metrics.epochs) for r in store.query() if r.metrics]
    return wall_s, statistics.fmean(epochs)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--cells", type=int, default=5)
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--device", default="cpu")
    options.add_argument("--steps", type=int, default=20, help="steps per epoch of each cell")
    options.add_argument("--replicas", type=int, default=1, help="ranks of each cell")
    options.add_argument("--quick", action="store_true", help="1 round, 2 cells of 5 steps")
    args = options.parse_args()
    if args.quick:
        args.cells, args.rounds, args.steps = 2, 1, 5
    first: dict[str, list[float]] = {side: [] for side in SIDES}
    overhead: dict[str, list[float]] = {side: [] for side in SIDES}
    torch_s: list[float] = []
    bare_s: list[float] = []
    for _ in range(args.rounds):
        torch_s.append(import_torch_s())
        bare_s.append(bare_script_s(2 * args.steps))  # CELL's two epochs
        for side, switch in SIDES.items():
            one, _ = timed_run([4], args.steps, args.device, switch, args.replicas)
            batches = [4 * (i + 1) for i in range(args.cells)]
            many, work = timed_run(batches, args.steps, args.device, switch, args.replicas)
            first[side].append(one)
            overhead[side].append((many - one) / (args.cells - 1) - work)
    print(
        f"{args.rounds} round(s), {args.cells} cells of {args.replicas} rank(s); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'':8} {'first result (s)':>17} {'overhead per cell (s)':>22}")
    for side in SIDES:
        print(
            f"{side:8} {statistics.median(first[side]):17.2f} "
            f"{statistics.median(overhead[side]):22.2f}"
        )
    print(f"{'import torch':12} {statistics.median(torch_s):13.2f}")
    print(f"{'bare script':12} {statistics.median(bare_s):13.2f}")
    ratios = [s / f for s, f in zip(first["server"], first["fresh"], strict=True)]
    print(f"ratio first result server/fresh: {statistics.median(ratios):.3f}")
    ratios = [s / b for s, b in zip(first["server"], bare_s, strict=True)]
    print(f"ratio first result server/bare torch script: {statistics.median(ratios):.3f}")
    ratios = [s / t for s, t in zip(first["server"], torch_s, strict=True)]
    print(f"ratio first result server/import torch: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
