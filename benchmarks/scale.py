"""How accelbench's own work grows with the data: the results table over N and 4N stored
records, and a cell's statistics (the warm-up cut, the median's interval) over N and 4N steps.

Each is timed at both sizes in one run, alternating; the ratio of times at 4x the size is 4.0
for linear work and 16.0 for quadratic (the table took 31 s at 10k records and 262 s at 30k,
and a cell of 30,000 steps spent two minutes in its statistics, before both became linear).
The last line printed is the table's ratio.

    python benchmarks/scale.py             # 2,000 and 8,000 records; 30,000 and 120,000 steps
    python benchmarks/scale.py --quick     # seconds: what the test suite runs, so it cannot rot
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable

from accelbench.cell.runner import run
from accelbench.records.result import Result, result_key
from accelbench.records.spec import RunSpec
from accelbench.records.stats import summarize, warmup_end
from accelbench.report.results import results_grid


def records(base: Result, count: int) -> list[Result]:
    """`count` copies of a measured result, each a cell of its own (another seed and batch)."""
    out = []
    for i in range(count):
        spec = base.spec.model_copy(update={"seed": i, "batch_size": 1 + i % 64})
        out.append(base.model_copy(update={"spec": spec, "key": result_key(spec, base.env)}))
    return out


def seconds(work: Callable[[], object], at_least_s: float = 0.2) -> float:
    """The wall time of one run of `work`, averaged over as many runs as fill `at_least_s`
    after one untimed run, with the garbage collector off as timeit has it (its passes over
    torch's objects, not the work, made the first 8,000-step timings 5x slower)."""
    work()
    gc.disable()
    try:
        runs, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < at_least_s or runs == 0:
            work()
            runs += 1
    finally:
        gc.enable()
    return elapsed / runs


def ratio(small: Callable[[], object], large: Callable[[], object], rounds: int) -> float:
    """Time of `large` over time of `small`, each the median of alternating rounds."""
    pairs = [(seconds(small), seconds(large)) for _ in range(rounds)]
    return statistics.median(b for _, b in pairs) / statistics.median(a for a, _ in pairs)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--records", type=int, default=2000)
    options.add_argument("--steps", type=int, default=30_000)
    options.add_argument("--rounds", type=int, default=3)
    options.add_argument("--device", default="cpu", help="where the one measured cell runs")
    options.add_argument("--quick", action="store_true", help="200 records, 2,000 steps")
    args = options.parse_args()
    if args.quick:
        args.records, args.steps, args.rounds = 200, 2000, 2
    base = run(  # its 16 steps, a stored record of a site's size (store_scale.py says why)
        RunSpec(
            workload="tiny_mlp",
            batch_size=4,
            epochs=2,
            steps_per_epoch=8,
            min_steady_s=0,
            device=args.device,
        )
    )
    rng = random.Random(0)
    steps = [rng.gauss(10.0, 1.0) for _ in range(4 * args.steps)]

    def cell(n: int) -> Callable[[], object]:
        return lambda: (warmup_end(steps[:n]), summarize(steps[:n]))

    stats_ratio = ratio(cell(args.steps), cell(4 * args.steps), args.rounds)
    print(f"cell statistics, {args.steps:,} -> {4 * args.steps:,} steps: {stats_ratio:.1f}x time")
    few, many = records(base, args.records), records(base, 4 * args.records)
    table_ratio = ratio(lambda: results_grid(few), lambda: results_grid(many), args.rounds)
    print(
        f"results table, {args.records:,} -> {4 * args.records:,} records: {table_ratio:.1f}x time"
    )
    print("(4.0x is linear, 16.0x quadratic)")
    print(f"ratio table time 4N/N: {table_ratio:.3f}")


if __name__ == "__main__":
    main()
