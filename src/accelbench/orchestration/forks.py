"""The sweep's side of the cell server (cell/server.py): a process that has imported torch once
and forks each cell, instead of a fresh interpreter per cell that imports it again (about 3 s
a cell here, most of a small cell's time).

A cell started here is what launch.py's Popen gives, as far as launch.py can tell: a pid that
leads its own session, wait(timeout) and a returncode. `serving()` starts a server for the
block (on Linux); outside one, or with ACCELBENCH_FORK_SERVER=0, or if the server will not start,
cells start in fresh interpreters as before. The server outlives its block, for the next block
of the same process (the Python API called again, the test suite: 7 s of CPU a sweep here, most
of a small sweep's cost), and ends with the process.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

from accelbench.cell import server as cell_server

log = logging.getLogger(__name__)

SWITCH = "ACCELBENCH_FORK_SERVER"
"""Environment variable: 0 starts every cell, and every rank of one, in a fresh interpreter
instead (launch.py)."""
CHILD = ["-m", cell_server.CHILD]
"""The interpreter's arguments that run a cell or a probe (cell/child.py)."""
START_TIMEOUT_S = 120.0
"""How long the server may take to import torch and the cell code."""

_active: list[CellServer] = []
_kept: list[CellServer] = []
"""The last block's server, idle, for the next block of this process."""


def _die_with_parent(prctl: Any, parent: int, sig: int) -> None:  # between fork and exec
    """Linux: the child (a cell, a probe, the cell server) gets `sig` when the sweep dies, even
    by kill -9, so it stops (and stores nothing) instead of running on as an orphan beside the
    next sweep's cells. Nothing is imported here: another thread may have held the import lock
    at the fork."""
    prctl(1, sig)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the sweep died before prctl took effect
        os.kill(os.getpid(), sig)


def on_parent_death(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    if sys.platform != "linux":
        return None
    import ctypes

    return partial(_die_with_parent, ctypes.CDLL(None).prctl, os.getpid(), sig)


class ServerGone(RuntimeError):
    """The server ended (killed from outside): its cell is lost with it."""


class CellServer:
    """One server process and its pipes; one cell at a time."""

    def __init__(self) -> None:
        # Unlinked as it is made, so that nothing is left behind however the sweep ends (a
        # directory of its own was, at each kill -9); close() closes it.
        self._log = tempfile.TemporaryFile(prefix="accelbench-server-")  # noqa: SIM115
        self._process = subprocess.Popen(
            [sys.executable, "-m", cell_server.__name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,  # Ctrl-C goes to the sweep, which stops the cell
            # It ignores SIGTERM, so that a cell it forked stops and reports as one started by
            # the sweep would; it dies with the sweep, and its cells with it.
            preexec_fn=on_parent_death(signal.SIGKILL),
        )
        self._buffer = b""
        self._ready = False
        self.broken = False
        self.pending = False  # a cell started whose exit has not been read
        self._owner, self._imported_with = os.getpid(), _import_environment()

    def serves_again(self) -> bool:
        """Whether a later block of this process may use this server: it is alive and idle, and
        it imported torch under the environment the block has (a cell's own variables are set
        at its fork, but what torch read at its import, OMP_NUM_THREADS say, stays)."""
        return (
            not self.broken
            and not self.pending
            and self._process.poll() is None
            and self._owner == os.getpid()  # not a copy in a process forked from the owner
            and self._imported_with == _import_environment()
        )

    def start(self, argv: list[str], log_path: Path) -> Forked:
        """Fork a process running `python *argv` (-m MODULE ...), its output to log_path."""
        if not self._ready:
            if self.read_line(START_TIMEOUT_S) != "ready":
                raise ServerGone(f"the cell server did not start: {self._tail()}")
            self._ready = True
        request = {"argv": argv, "log": str(log_path), "cwd": os.getcwd(), "env": dict(os.environ)}
        assert self._process.stdin is not None
        try:
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
        except OSError as exc:
            raise ServerGone(f"the cell server is gone: {exc}") from None
        self.pending = True
        started = self.read_line(None)
        assert started is not None  # no timeout: a line or ServerGone
        return Forked(self, int(json.loads(started)["pid"]))

    def read_line(self, timeout: float | None) -> str | None:
        """The server's next line, None if none came within `timeout`; ServerGone at its end."""
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                self.broken = True
                raise ServerGone(f"the cell server ended: {self._tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def _tail(self) -> str:
        fd = self._log.fileno()  # read where it is, not moving the offset the server writes at
        text = os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        lines = text.strip().splitlines()
        return lines[-1] if lines else f"exit code {self._process.poll()}"

    def close(self) -> None:
        """End the server: its input closes and it leaves its loop. One that never served (a
        dry run, input refused) is killed, not waited for while it imports."""
        with suppress(OSError):
            assert self._process.stdin is not None
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10 if self._ready else 0)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        self._log.close()


class Forked:
    """A cell the server forked, as subprocess.Popen shows a process."""

    def __init__(self, server: CellServer, pid: int) -> None:
        self.server, self.pid = server, pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                line = self.server.read_line(timeout)
            except ServerGone:  # its cells were killed with it: wait until this one is gone
                log.warning("the cell server ended while cell %d ran", self.pid)
                self._vanish(timeout)
                self.returncode = -signal.SIGKILL  # its exit code is lost with the server
                return self.returncode
            if line is None:
                raise subprocess.TimeoutExpired(f"cell {self.pid}", timeout or 0)
            self.returncode = int(json.loads(line)["returncode"])
            self.server.pending = False
        return self.returncode

    def _vanish(self, timeout: float | None) -> None:
        deadline = time.monotonic() + (timeout if timeout is not None else 3600.0)
        while time.monotonic() < deadline:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def active() -> CellServer | None:
    """The server of the enclosing `serving()` block, if it has one that works."""
    return _active[-1] if _active and not _active[-1].broken else None


@contextmanager
def serving() -> Iterator[None]:
    """Cells started in the block are forked by one cell server (a block inside another shares
    its server)."""
    # Linux only: macOS's system libraries are not safe to use after a fork (Python's own
    # multiprocessing spawns there), and Windows has no fork.
    if _active or os.environ.get(SWITCH, "1") == "0" or sys.platform != "linux":
        yield
        return
    server = _kept.pop() if _kept and _kept[0].serves_again() else None
    _close_kept()  # one that may not serve again ends before another starts importing torch
    server = server or CellServer()
    _active.append(server)
    try:
        yield
    finally:
        _active.remove(server)
        _kept.append(server)


def start_early() -> None:
    """Start the server the next `serving()` block takes, now: a command that will run cells
    calls this before its other imports, which the server's import of torch then runs beside.
    One the block cannot use (its environment changed since) is ended there; one never used
    (a dry run, refused input) ends with the process."""
    if not _kept and os.environ.get(SWITCH, "1") != "0" and sys.platform == "linux":
        _kept.append(CellServer())


def _close_kept() -> None:
    while _kept:
        _kept.pop().close()


atexit.register(_close_kept)


def _import_environment() -> dict[str, str]:
    """The environment a server's imports read: all of it but accelbench's own variables, which
    a cell reads after its fork, and pytest's name of the test in progress."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("ACCELBENCH_") and name != "PYTEST_CURRENT_TEST"
    }


def fork_or_exec(argv: list[str], log_path: Path, **popen: Any) -> Forked | subprocess.Popen[bytes]:
    """Start `python *argv` (-m MODULE ...: a cell, a probe, torchrun over a cell's ranks):
    forked by the active server, else in a fresh interpreter with subprocess.Popen(**popen),
    output to log_path either way."""
    server = active()
    if server is not None:
        try:
            return server.start(argv, log_path)
        except ServerGone as exc:
            server.broken = True
            log.warning("%s; cells start in fresh interpreters from now on", exc)
    with log_path.open("a") as out:
        return subprocess.Popen(
            [sys.executable, *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            **popen,
        )
