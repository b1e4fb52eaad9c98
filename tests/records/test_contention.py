"""Contention: what the monitor reads on a real run beside a busy process, and how readings of
several ranks combine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.analysis import validity
from accelbench.execution.meters import host as meters_host
from accelbench.records import contention
from accelbench.records.contention import HostActivity
from accelbench.report.database import ResultStore

from ..cli.test_cli import invoke
from ..conftest import tiny

# A steady state long enough (over contention.MIN_WINDOW_S) for CPU times to be read, on any
# machine: epochs are added until it lasts --min-steady-s (0.25 s by default, MIN_WINDOW_S), and
# an interval target no run meets keeps it measuring to its 2 s budget. Few steps an epoch: on
# CPUs that spinners keep busy, each of torch's threads waits for the others at every op (400
# steps took 37 s alone, 65 s in the suite).
BUSY_CELL = (
    "--batch-size",
    "64",
    "--epochs",
    "2",
    "--steps-per-epoch",
    "20",
    "--ci",
    "0.01%",
    "--max-measure-s",
    "2",
)


@pytest.fixture
def busy_host() -> Iterator[None]:
    """A spinning process on every CPU: the second busy process a shared node has. Started
    through a launcher that exits, so that they are not this process's children, which the
    busy-host reading counts as its own work (the test passed only while the suite's other
    worker kept the host busy)."""
    spin = (
        "import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', 'while True: pass'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
    )
    launched = [
        subprocess.run([sys.executable, "-c", spin], capture_output=True, text=True, check=True)
        for _ in range(os.cpu_count() or 1)
    ]
    pids = [int(done.stdout) for done in launched]
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_run_beside_a_busy_process_is_warned_of_and_flagged_contended(
    busy_host: None, db_path: Path
) -> None:
    # Through the CLI, so that the cell runs in a process of its own, which the spinners are not
    # children of (a process's children count as its own work). The cell needs every CPU,
    # whatever threads the suite gives each process.
    every = str(os.cpu_count() or 1)
    cell = ("run", "tiny_mlp", *BUSY_CELL, "--threads", every, "--device", "cpu")
    code, output = invoke(*cell, "--db", str(db_path))
    assert code == 0, output
    assert "warning: other processes keep" in output  # said before the first cell
    with ResultStore(db_path) as store:
        [result] = store.query()
    m = result.metrics
    assert m is not None and m.host is not None
    assert m.host.window_s >= contention.MIN_WINDOW_S
    assert m.host.others_cpus > m.host.num_cpus - m.host.cell_cpus + contention.SLACK_CPUS
    why = dict(validity.verdict(result))[validity.Flag.CONTENDED]
    assert "other processes kept" in why and "run where nothing else does" in why
    assert "contended" in output


def test_threads_auto_takes_the_cpus_other_work_leaves_free() -> None:
    auto = contention.auto_threads
    assert auto(tiny(), "cpu", free=1, num_cpus=2) == 1
    assert auto(tiny(), "cpu", free=0, num_cpus=2) == 1  # at least one
    assert auto(tiny(), "cpu", free=2, num_cpus=2) is None  # all free: torch's default
    assert auto(tiny(threads="auto"), "cpu", free=3, num_cpus=8) == 3
    assert auto(tiny(threads=4), "cpu", free=1, num_cpus=8) == 4  # the user's own
    assert auto(tiny(threads="auto"), "cuda", free=1, num_cpus=8) is None
    assert auto(tiny(replicas=2, threads="auto"), "cpu", free=5, num_cpus=8) == 2
    assert auto(tiny(replicas=2), "cpu", free=5, num_cpus=8) is None  # torchrun's one
    assert contention.free_cpus(1.2, 4) <= 3 and contention.free_cpus(9.0, 4) == 0


@pytest.mark.slow
def test_a_cpu_cell_on_a_busy_host_runs_with_the_threads_that_are_free(
    busy_host: None, db_path: Path
) -> None:
    code, output = invoke("run", "tiny_mlp", *BUSY_CELL, "--device", "cpu", "--db", str(db_path))
    assert code == 0, output
    assert "threads: other processes keep" in output and "CPU cells run with --threads 1" in output
    with ResultStore(db_path) as store:
        [result] = store.query()
    # The choice is the record's (torch_num_threads), not the spec's: the cell's key, and so a
    # resumed sweep, does not depend on how busy the host was.
    assert result.spec.threads is None
    assert result.env.torch_num_threads < (os.cpu_count() or 1)
    assert contention.FREE_CPUS_ENV not in os.environ  # handed to the cells, then taken back


def test_the_cell_needs_its_threads_on_a_cpu_and_one_core_per_device_elsewhere() -> None:
    cpus = os.cpu_count() or 1
    assert contention.cell_cpus(tiny(), "cpu", 1) == 1
    assert contention.cell_cpus(tiny(), "cpu", 10**6) == cpus  # at most the host's
    assert contention.cell_cpus(tiny(replicas=2, workers=1), "cuda", 8) == min(cpus, 3)


def reading(**changes: object) -> HostActivity:
    fields: dict[str, object] = {
        "num_cpus": 8,
        "cell_cpus": 1.0,
        "busy_cpus": 1.0,
        "own_cpus": 1.0,
        "steal_frac": 0.0,
        "load_avg_start": 1.0,
        "load_avg_end": 1.0,
        "window_s": 5.0,
    }
    return HostActivity.model_validate(fields | changes)


def test_ranks_on_one_host_are_not_each_others_contention() -> None:
    # Two ranks on one 8-CPU host, each using 3 CPUs: each sees 6 busy, 3 its own.
    rank = reading(cell_cpus=4.0, busy_cpus=6.0, own_cpus=3.0)
    combined = contention.combine([("a", rank), ("a", rank)])
    assert combined.own_cpus == 6.0 and combined.cell_cpus == 8.0
    assert combined.others_cpus == 0.0 and contention.contended(combined) is None


def test_the_worst_host_is_the_runs() -> None:
    quiet = reading()
    loud = reading(cell_cpus=4.0, busy_cpus=8.0, own_cpus=1.0, other_gpu_pids=[77])
    combined = contention.combine([("a", quiet), ("b", loud)])
    assert combined.others_cpus == 7.0 and combined.other_gpu_pids == [77]
    why = contention.contended(combined) or ""
    assert "other processes kept 7.0 of 8 CPUs busy" in why and "pid 77" in why


def test_a_monitor_never_started_reads_nothing() -> None:
    # a run stopped during epoch 1 never reaches the steady state the monitor watches
    import torch

    assert meters_host.HostMonitor(tiny(), torch.device("cpu")).stop() is None


def test_an_idle_host_is_not_contended_for_a_hundredth_of_a_cpu() -> None:
    # Two one-thread ranks on two CPUs waiting on each other's collectives: short of their two
    # CPUs, while daemons used 0.01 of one.
    idle = reading(num_cpus=2, cell_cpus=2.0, busy_cpus=1.41, own_cpus=1.4)
    assert contention.contended(idle) is None
    shared = reading(num_cpus=2, cell_cpus=1.0, busy_cpus=2.0, own_cpus=0.67)  # 2 spinners
    assert contention.contended(shared) is not None


def test_the_busy_warning_names_threads_that_fit_and_is_quiet_when_they_do() -> None:
    # One CPU of two held by another process: a cell on every CPU is warned and told
    # --threads 1; a cell of one thread fits beside it and is not warned at all.
    cpus = 2
    every = contention.cpus_needed(tiny(), "cpu", cpus)
    one = contention.cpus_needed(tiny(threads=1), "cpu", cpus)
    assert (every, one) == (2, 1)
    warning = contention.busy_warning(1.0, cpus, 1.3, every)
    assert warning is not None and "give --threads 1 (with --workers 0)" in warning
    assert contention.busy_warning(1.0, cpus, 1.3, one) is None
    full = contention.busy_warning(2.0, cpus, 2.5, one)
    assert full is not None and "even --threads 1 (with --workers 0) shares a busy CPU" in full
    assert contention.cpus_needed(tiny(replicas=2, threads=3), "cuda", 16) == 2


def test_the_subject_processes_cpu_time_counts_as_the_cells_own_and_once() -> None:
    # A server under test spinning beside the cell, started apart from it (not its child, as
    # a server is): its CPU seconds are added to the cell's own, so it is never "other work".
    # Waited for in CPU seconds, which a loaded host slows no more than the work itself: no
    # time or rate is asserted.
    import psutil

    started = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    server = psutil.Process(int(started.stdout))
    try:
        assert server.pid not in {c.pid for c in psutil.Process().children(recursive=True)}
        while sum(server.cpu_times()[:2]) < 0.5:
            time.sleep(0.05)
        alone = meters_host._own_cpu_s()
        with_server = meters_host._own_cpu_s([server.pid])
        assert with_server - alone >= 0.5
    finally:
        server.kill()
        server.wait()
    # A server the cell started itself is in its tree already: counted once, not twice.
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        while sum(psutil.Process(child.pid).cpu_times()[:2]) < 0.5:
            time.sleep(0.05)
        twice = meters_host._own_cpu_s([child.pid]) - meters_host._own_cpu_s()
        assert twice < 0.5
    finally:
        child.kill()
        child.wait()
