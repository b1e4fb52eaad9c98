"""Never lose a result: kill -9 and resume, SIGTERM, many writers at once."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from accelbench.cell.environment import capture
from accelbench.cell.server import NAME
from accelbench.records.result import Result
from accelbench.report.database import ResultStore

from ..conftest import ctrl_c_reaches, quick, tiny

QUICK = quick()
SWEEP = ["run", "tiny_mlp", "--batch-size", "2,4,8"]


def start(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "accelbench", *args, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def stored(db: Path) -> dict[str, tuple[str, str]]:
    """key -> (status, created_at) of every stored result."""
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        try:
            rows = conn.execute("SELECT key, status, created_at FROM results").fetchall()
        except sqlite3.OperationalError:  # the sweep is creating the schema right now
            return {}
    return {key: (status, created) for key, status, created in rows}


def wait_for_rows(db: Path, n: int, proc: subprocess.Popen[str], limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while len(stored(db)) < n:
        assert proc.poll() is None, "the sweep ended before it was interrupted"
        assert time.monotonic() < deadline, f"no {n} stored results within {limit_s} s"
        time.sleep(0.1)


def is_cell(process: psutil.Process) -> bool:
    """A cell's process: started as accelbench.cell.child, or forked by the cell server."""
    try:
        return "cell" in process.cmdline() or process.name() == NAME
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


CELL_STARTED_CPU_S = 4.0
"""CPU seconds after which a cell is surely past importing torch and building its model (about
2.5 s here): measured in CPU time, which a loaded host slows no more than the work itself."""


def wait_for_cpu_work(proc: subprocess.Popen[str], cpu_s: float, limit_s: float = 300) -> None:
    """Until a cell the sweep `proc` started has used `cpu_s` seconds of CPU."""
    deadline = time.monotonic() + limit_s
    while True:
        assert proc.poll() is None, "the sweep ended first"
        assert time.monotonic() < deadline, f"no cell used {cpu_s} s of CPU within {limit_s} s"
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess):
                if is_cell(child) and sum(child.cpu_times()[:2]) >= cpu_s:
                    return
        time.sleep(0.1)


def kill_hard(proc: subprocess.Popen[str]) -> None:
    """kill -9 of the sweep and of the cell it started (which has a session of its own)."""
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.kill()
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    proc.wait()


def test_kill_9_at_random_points_then_resume_gives_the_uninterrupted_cells(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    db = tmp_path / "killed.sqlite"
    for attempt in range(2):
        proc = start(db, *SWEEP, *QUICK)
        time.sleep(rng.uniform(0.5, 8.0))
        kill_hard(proc)
        before = stored(db)
        assert all(status == "ok" for status, _ in before.values()), f"seed {seed}, {attempt}"
    resumed = start(db, *SWEEP, *QUICK)
    output = resumed.communicate()[0]
    assert resumed.returncode == 0, output
    after = stored(db)
    # Exactly the sweep's cells, each once, all measured.
    with sqlite3.connect(db) as conn:
        batches = sorted(b for (b,) in conn.execute("SELECT micro_batch FROM results"))
    assert batches == [2, 4, 8], f"seed {seed}"
    assert all(status == "ok" for status, _ in after.values())
    # Nothing done twice: what was stored before the resume was skipped, and kept as it was.
    assert output.count("stored earlier, skipped") == len(before), f"seed {seed}"
    assert all(after[key] == value for key, value in before.items())


def test_sigterm_records_the_cell_in_flight_as_interrupted_and_resume_reruns_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "results.sqlite"
    # A first cell of two steps, then one of 30 short epochs: it is surely in flight once past
    # its imports, and before its last epoch (3 epochs of 4000 steps lasted 1.9 s on a quiet
    # host, and its imports took as much CPU as the signal waits for, so the signal came during
    # the last epoch and the cell ended whole); its epoch in flight ends within the grace period.
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        "axes = { steps_per_epoch = [2, 1000] }\n"
        'fixed = { workload = "tiny_mlp", batch_size = 4, epochs = 30, window_steps = 1, '
        'device = "cpu", threads = 1 }\n'
    )
    proc = start(db, "run", "--sweep", str(sweep))
    wait_for_rows(db, 1, proc)
    wait_for_cpu_work(proc, CELL_STARTED_CPU_S)  # the second cell is past its imports
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 143, output
    assert "interrupted by SIGTERM" in output
    statuses = sorted(status for status, _ in stored(db).values())
    assert statuses == ["interrupted", "ok"]
    with sqlite3.connect(db) as conn:
        (record,) = conn.execute(
            "SELECT record FROM results WHERE status = 'interrupted'"
        ).fetchone()
    interrupted = Result.model_validate_json(record)
    assert interrupted.reason is not None and interrupted.reason.startswith(
        "stopped by SIGTERM after"
    )
    if interrupted.metrics is None:  # a host so loaded that no epoch ended within the grace
        assert "nothing measured yet" in interrupted.reason
    else:  # it finished the epoch in flight and kept what it measured
        assert 1 <= len(interrupted.metrics.epochs) < 30
        kept = f"{len(interrupted.metrics.epochs)} of 30 epochs measured, kept"
        assert kept in interrupted.reason
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    again = start(db, "run", "--sweep", str(sweep))
    output = again.communicate()[0]
    assert again.returncode == 0, output
    assert output.count("stored earlier, skipped") == 1  # the finished cell, not the interrupted
    assert sorted(status for status, _ in stored(db).values()) == ["ok", "ok"]


WRITERS, PER_WRITER = 8, 200


def _write(where: str, writer: int) -> None:
    env = capture("cpu")
    with ResultStore(where) as store:
        for i in range(PER_WRITER):
            spec = tiny(repeat=writer * PER_WRITER + i)
            store.put(Result.new(spec, env, "error", reason=f"writer {writer} item {i}"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_concurrent_writers_lose_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = (
        str(tmp_path / "shared.sqlite")
        if backend == "sqlite"
        else request.getfixturevalue("fresh_postgres")
    )
    # Forked from one fresh process that has imported torch (capture's) and this module, not
    # eight interpreters importing them each (the pytest worker has threads: no plain fork).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", __name__])
    # All at once on a database none of them has made yet: they race to create it, too.
    procs = [ctx.Process(target=_write, args=(where, w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    with ResultStore(where) as store:
        reasons = {r.reason for r in store.query()}
    assert reasons == {f"writer {w} item {i}" for w in range(WRITERS) for i in range(PER_WRITER)}
    if backend == "sqlite":
        with sqlite3.connect(where) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_stopping_a_cell_that_has_just_ended_is_no_error() -> None:
    from accelbench.orchestration import launch

    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    child.wait()
    launch._kill(child)  # Ctrl-C at the cell's very end: its session is gone already
    assert child.returncode == 0


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_cell_dies_with_its_sweep_even_by_kill_9(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = [*SWEEP, "--epochs", "2", "--steps-per-epoch", "100000"]
    proc = start(tmp_path / "r.sqlite", *args, env=os.environ | {"TMPDIR": str(temp)})
    deadline = time.monotonic() + 300
    cells: list[psutil.Process] = []
    while not cells:
        assert proc.poll() is None and time.monotonic() < deadline, "no cell started"
        cells = [c for c in psutil.Process(proc.pid).children(recursive=True) if is_cell(c)]
        time.sleep(0.1)
    (server,) = [
        c for c in psutil.Process(proc.pid).children() if "accelbench.cell.server" in c.cmdline()
    ]
    log = os.readlink(f"/proc/{server.pid}/fd/2")  # the server's log: unlinked as it was made
    assert log.startswith(str(temp)) and log.endswith("(deleted)"), log
    proc.kill()  # kill -9: nothing in the sweep runs to stop its cell
    proc.wait()
    _, alive = psutil.wait_procs(cells, timeout=30)
    for orphan in alive:
        orphan.kill()
    assert alive == [], "the cell outlived its sweep"
    assert not list(temp.glob("accelbench-server-*"))  # the cell's own files may be left


def test_ctrl_c_in_the_python_api_stores_the_cell_in_flight(tmp_path: Path) -> None:
    """run_sweep is as safe as the CLI: the cell in flight is stored as interrupted."""
    db = tmp_path / "results.sqlite"
    script = (
        "from accelbench import ResultStore, RunSpec, run_sweep\n"
        "quick = dict(workload='tiny_mlp', epochs=2, window_steps=1, device='cpu')\n"
        "short = RunSpec(**quick, batch_size=2, steps_per_epoch=2)\n"
        "endless = RunSpec(**quick, batch_size=4, steps_per_epoch=1_000_000)\n"
        f"with ResultStore({str(db)!r}) as store:\n"
        "    run_sweep([short, endless], store)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=ctrl_c_reaches,
    )
    wait_for_rows(db, 1, proc)
    deadline = time.monotonic() + 300
    while not [c for c in psutil.Process(proc.pid).children(recursive=True) if is_cell(c)]:
        assert time.monotonic() < deadline, "the second cell never started"
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode != 0 and "Interrupted: Ctrl-C" in output, output
    assert sorted(status for status, _ in stored(db).values()) == ["interrupted", "ok"]
