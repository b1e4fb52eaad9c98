"""How the read commands grow with a site database: time and peak memory of each at two sizes.

Two SQLite databases of N and kN records (k: --times, 3) shaped as a site's are built: distinct
cells (16 workloads x 8 batch sizes x 4 precisions x 2 scenarios, 1,024; --quick: 4 x 4 x 2 x
2) measured on 16 hosts of two clusters (--quick: 4), each cell on each host repeated as the
records allow, written from two measured results (a training and an inference cell) with their
rates drawn +-5% at random. Each read command runs on both in a fresh process, as a user runs
it: its wall and CPU seconds (user and system, its children's included); the growth exponent
between the sizes is log(CPU ratio) / log(k): 1.0 is linear, 2.0 quadratic (each includes the
process's start, so small sizes understate it). Peak memory is the process's own peak resident
set (Linux's VmHWM), interpreter and imports included. The last line printed is the JSON Lines
export's CPU time ratio. Last, each size's JSON and JSON Lines exports are imported into a new
SQLite database (on --postgres too: the import's reading is what grows), the JSON Lines again
with --jobs 2.

    python benchmarks/store_scale.py             # 10,000 and 30,000 records
    python benchmarks/store_scale.py --records 100000 --times 10   # 100,000 and 1,000,000
    python benchmarks/store_scale.py --quick     # 500 and 1,500, three commands: the suite's
    python benchmarks/store_scale.py --postgres postgresql://me@host/db   # on that server

With --postgres the two databases are made on that server (it must let the user create
databases) and dropped after; the suite runs it quick on the server it starts.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from accelbench.cell.runner import run
from accelbench.records.metrics import Metrics
from accelbench.records.result import Result, result_key
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.workloads import WORKLOADS

COMMANDS = {
    "results (table)": ["results"],
    "results --format json": ["results", "--format", "json"],
    "results --format csv": ["results", "--format", "csv"],
    "export (json)": ["export"],
    "export --format jsonl": ["export", "--format", "jsonl"],
    "report --format csv": ["report", "--format", "csv"],
    "report --format md": ["report", "--format", "md"],
    "report (html, figures)": ["report"],
    "fleet": ["fleet"],
    "compare --by batch_size": ["compare", "--by", "batch_size"],
    "roofline": ["roofline"],
    "recommend WORKLOAD": ["recommend", "WORKLOAD"],
    "history": ["history"],
}
IMPORTS: dict[str, tuple[str, list[str]]] = {
    "import (json)": ("json", []),
    "import (jsonl)": ("jsonl", []),
    "import (jsonl) --jobs 2": ("jsonl", ["--jobs", "2"]),
}
"""Each size's export, made untimed, imported into a new SQLite database (with --jobs, the
CPU time is its processes' together, the peak memory the importing one's)."""
QUICK = ("results (table)", "export --format jsonl")
QUICK_IMPORTS = ("import (jsonl)", "import (jsonl) --jobs 2")
"""What --quick times (the suite's run: the script whole, a listing and the ratio's export, but
a command is a process start of a second or two here, and each command's own test reads its
output)."""
RUN = (
    "import sys\n"
    "from pathlib import Path\n"
    "from accelbench.cli import main\n"
    "sys.argv = ['accelbench', *sys.argv[1:]]\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "peak = [l for l in Path('/proc/self/status').read_text().splitlines() if 'VmHWM' in l]\n"
    "print(peak[0].split()[1], file=sys.stderr)\n"
)
"""A command in a fresh process that reports its own peak resident set (KiB, VmHWM: unlike
ru_maxrss, which exec keeps from the parent, it is this program's own) last on stderr."""


Measured = tuple[float, float, float]
"""Wall seconds, CPU seconds and peak MB of a command."""


@contextmanager
def databases(sizes: tuple[int, int], postgres: str | None) -> Iterator[list[str]]:
    """A place for each size's database: SQLite files in a temporary folder, or databases
    made on the PostgreSQL server of `postgres` (a URL) and dropped after."""
    if postgres is None:
        with tempfile.TemporaryDirectory() as tmp:
            yield [str(Path(tmp, f"{n}.sqlite")) for n in sizes]
        return
    import psycopg

    names = [f"accelbench_scale_{n}" for n in sizes]
    with psycopg.connect(postgres, autocommit=True) as server:
        for name in names:
            server.execute(f"DROP DATABASE IF EXISTS {name}")
            server.execute(f"CREATE DATABASE {name}")
        try:
            yield [urlsplit(postgres)._replace(path=f"/{name}").geturl() for name in names]
        finally:
            for name in names:
                server.execute(f"DROP DATABASE IF EXISTS {name}")


@dataclass(frozen=True)
class Site:
    """The shape of a site's database: its distinct cells and the hosts that measure them."""

    workloads: tuple[str, ...]
    batches: tuple[int, ...]
    precisions: tuple[str, ...]
    hosts: int
    scenarios: tuple[str, ...] = ("train", "infer")

    @property
    def cells(self) -> list[tuple[str, int, str, str]]:
        return list(
            itertools.product(self.workloads, self.batches, self.precisions, self.scenarios)
        )


def site(quick: bool) -> Site:
    models = [n for n in sorted(WORKLOADS) if "/" not in n]
    if quick:
        return Site(tuple(models[:4]), (1, 8, 32, 128), ("fp32", "bf16"), hosts=4)
    return Site(tuple(models[:16]), tuple(2**i for i in range(8)), PRECISIONS, hosts=16)


PRECISIONS = ("fp32", "tf32", "bf16", "amp-bf16")


def build(path: str, bases: dict[str, Result], count: int, shape: Site) -> None:
    """A database of `count` records of the site's cells on its hosts, each a copy of the base
    result of its scenario with its rate drawn +-5%, a second apart so that they sort as a
    history does."""
    rng = random.Random(0)
    cells = shape.cells
    with ResultStore(path) as store:
        batch = []
        for i in range(count):
            workload, size, precision, scenario = cells[i % len(cells)]
            host = (i // len(cells)) % shape.hosts
            base = bases[scenario]
            spec = base.spec.model_copy(
                update={
                    "workload": workload,
                    "batch_size": size,
                    "precision": precision,
                    "platform": f"cluster-{host % 2}",
                    "repeat": i // (len(cells) * shape.hosts),
                }
            )
            env = base.env.model_copy(update={"hostname": f"node{host:02d}"})
            when = base.created_at.replace(microsecond=0).timestamp() + i
            batch.append(
                base.model_copy(
                    update={
                        "spec": spec,
                        "env": env,
                        "key": result_key(spec, env),
                        "metrics": _drawn(base, rng.uniform(0.95, 1.05)),
                        "created_at": base.created_at.fromtimestamp(when, base.created_at.tzinfo),
                    }
                )
            )
            if len(batch) == 1000:
                store.add(batch)
                batch = []
        store.add(batch)


def _drawn(base: Result, factor: float) -> Metrics:
    """The base's metrics with its delivered rate, and its interval, times `factor`."""
    m = base.metrics
    assert m is not None
    d = m.delivered
    scaled = d.model_copy(
        update={
            "items_per_s": d.items_per_s * factor,
            "ci_low": None if d.ci_low is None else d.ci_low * factor,
            "ci_high": None if d.ci_high is None else d.ci_high * factor,
            "time_s": d.time_s / factor,
            "block_s": [s / factor for s in d.block_s],
        }
    )
    return m.model_copy(update={"delivered": scaled})


def measure(command: list[str], db: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak MB of one command on one database."""
    with tempfile.TemporaryDirectory() as here:  # where an HTML report is written
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", RUN, *command, "--db", db],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=True,
            cwd=here,
        )
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, int(done.stderr.strip().splitlines()[-1]) / 1024


def line(name: str, times: float, first: Measured, second: Measured) -> float:
    """Print a command's two sizes' wall and CPU times, growth exponent and peak memory; its
    CPU time ratio."""
    (w1, c1, m1), (w2, c2, m2) = first, second
    exponent = math.log(c2 / c1) / math.log(times)
    print(
        f"{name:24} {w1:8.2f} {c1:8.2f} s  {w2:8.2f} {c2:8.2f} s  {exponent:8.2f}  "
        f"{m1:5.0f} -> {m2:5.0f}"
    )
    return c2 / c1


def exported(db: str, form: str, path: Path) -> Path:
    """The database's export in this format, at `path`."""
    export = [sys.executable, "-m", "accelbench", "export", "--format", form, "--out", str(path)]
    subprocess.run([*export, "--db", db], check=True, stdout=subprocess.DEVNULL)
    return path


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--records", type=int, default=10_000)
    options.add_argument("--times", type=int, default=3, help="the second size: this times N")
    options.add_argument("--device", default="cpu", help="where the one measured cell runs")
    options.add_argument(
        "--quick", action="store_true", help="500 and 1,500 records, a few commands (QUICK)"
    )
    options.add_argument("--postgres", metavar="URL", help="on this PostgreSQL server instead")
    options.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="time only this command (a name of the table, again for more); default: all",
    )
    args = options.parse_args()
    if args.quick:
        args.records = 500
        args.only = args.only or [*QUICK, *QUICK_IMPORTS]
    commands = {k: v for k, v in COMMANDS.items() if not args.only or k in args.only}
    imports = {k: v for k, v in IMPORTS.items() if not args.only or k in args.only}
    bases = {
        scenario: run(
            RunSpec(
                workload="tiny_mlp",
                scenario=scenario,
                batch_size=4,
                epochs=2,
                steps_per_epoch=8,
                # Its 16 steps, as a site's cells keep about as many: topped up to 0.25 s of
                # steady state, tiny_mlp's record held 584 steps, 52 KB against 5.5 KB.
                min_steady_s=0,
                device=args.device,
            )
        )
        for scenario in ("train", "infer")
    }
    shape = site(args.quick)
    sizes = (args.records, args.times * args.records)
    print(
        f"a site: {len(shape.cells):,} cells on {shape.hosts} hosts, "
        f"{sizes[0]:,} and {sizes[1]:,} records"
    )
    with databases(sizes, args.postgres) as dbs:
        for db, n in zip(dbs, sizes, strict=True):
            build(db, bases, n, shape)
        print(
            f"{'':24} {f'{sizes[0]:,} records':>19}  {f'{sizes[1]:,} records':>19}\n"
            f"{'command':24} {'wall':>8} {'CPU':>8}    {'wall':>8} {'CPU':>8}    exponent  peak MB"
        )
        ratios = {}
        for name, command in commands.items():
            command = [shape.workloads[0] if c == "WORKLOAD" else c for c in command]
            ratios[name] = line(name, args.times, *(measure(command, db) for db in dbs))
        with tempfile.TemporaryDirectory() as folder:
            for number, (name, (form, flags)) in enumerate(imports.items()):
                files = [Path(folder, f"{n}.{form}") for n in sizes]
                for db, path in zip(dbs, files, strict=True):
                    if not path.exists():
                        exported(db, form, path)
                line(
                    name,
                    args.times,
                    # Each import into a database of its own (N.jsonl.2.sqlite): into one, the
                    # second import found every key stored and skipped all of them.
                    *(measure(["import", str(f), *flags], f"{f}.{number}.sqlite") for f in files),
                )
    print("(exponent 1.0 is linear, 2.0 quadratic; each time includes the process's start)")
    if "export --format jsonl" in ratios:  # not where --only left it out
        print(f"ratio jsonl export CPU time kN/N: {ratios['export --format jsonl']:.3f}")


if __name__ == "__main__":
    main()
