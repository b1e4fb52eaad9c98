"""How a cell's processes start, end and report (with forks.py, the cell server's client):
each cell runs in a fresh child.

A fresh process per cell means CUDA state, peak-memory counters, compiled graphs and an OOM cannot
leak from one cell into the next. Spec and result cross the boundary as JSON files.

The child is one process for one replica, forked by the cell server where one serves the sweep
(forks.py); torchrun (torch.distributed.run) with a rank per replica for several, which it forks
from its own process (_forked_ranks); and, for several nodes inside a Slurm allocation, srun
starting one torchrun per node that meet through a c10d rendezvous on this host. Rank 0 writes
the result; a rank that fails writes its own, and torchrun then stops the others.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import TextIO

from accelbench import scenarios
from accelbench.cell import preflight
from accelbench.errors import AccelbenchError
from accelbench.execution import progress
from accelbench.orchestration import exits, forks
from accelbench.records.environment import Environment
from accelbench.records.result import MEASURED, Result
from accelbench.records.spec import RunSpec

log = logging.getLogger(__name__)

_TAIL_LINES = 12
_GRACE_S = 20.0
"""How long a cell may take to stop and report after SIGTERM (Slurm waits 30 s, KillWait, before
it kills a job's processes)."""
CELL_DIR = "ACCELBENCH_CELL_DIR"
"""Environment variable: where cells keep their spec and result files (default: the system's
temporary directory, which ranks on other nodes cannot see)."""


class Interrupted(BaseException):
    """SIGTERM (a Slurm time limit, a kill) or Ctrl-C while a cell ran; `result` is that cell,
    recorded as interrupted. A BaseException, as KeyboardInterrupt is, so that no handler of
    ordinary errors swallows it."""

    def __init__(self, signal_name: str, result: Result | None = None) -> None:
        super().__init__(signal_name)
        self.signal_name, self.result = signal_name, result


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Turn SIGTERM into Interrupted inside the block, instead of death without clean-up."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Interrupted("SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGTERM and Ctrl-C back until the block ends, so that a write in it completes."""
    held = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


PROBE_TIMEOUT_S = 600.0
"""How long a probe may take: importing a user's module and building models on the meta device."""


def probe_environment(
    device: str, inputs: Sequence[preflight.Inputs] = (), timeout_s: float = PROBE_TIMEOUT_S
) -> Environment:
    """The platform a cell would see, captured in a child so this process never touches the
    device; the child also tries `inputs` (preflight.check), and what fails there raises here.
    It waits `timeout_s` at most (the sweep's own limit, where shorter than PROBE_TIMEOUT_S)."""
    return Environment.model_validate_json(_inspect(["env", device], inputs, device, timeout_s))


def preflight_in_child(
    inputs: Sequence[preflight.Inputs], timeout_s: float = PROBE_TIMEOUT_S
) -> None:
    """preflight.check in a child process, so that a user's code never runs in this one."""
    if inputs:
        _inspect(["check", "-"], inputs, "cpu", timeout_s)


def _inspect(
    args: list[str], inputs: Sequence[preflight.Inputs], device: str, timeout_s: float
) -> str:
    """Run the probe child in a session of its own, as a cell is: whatever a model's code forks
    in it ends with it, and holds no pipe of ours open."""
    with tempfile.TemporaryDirectory(prefix="accelbench-") as tmp:
        out, todo, log_path = Path(tmp, "out.json"), Path(tmp, "inputs.json"), Path(tmp, "log")
        todo.write_text(json.dumps([i.model_dump(mode="json") for i in inputs]))
        log_path.touch()
        child = forks.fork_or_exec(
            [*forks.CHILD, *args, str(out), str(todo)],
            log_path,
            preexec_fn=forks.on_parent_death(),
        )
        try:
            child.wait(timeout=min(timeout_s, PROBE_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            raise AccelbenchError(
                f"inspecting device {device!r} and the inputs took over "
                f"{min(timeout_s, PROBE_TIMEOUT_S):g} s: does a model file wait for something "
                "when imported or built? (--timeout-s bounds it too)"
            ) from None
        finally:
            _signal_group(child.pid, signal.SIGKILL)
            child.wait()
        if child.returncode != 0 or not out.exists():
            raise AccelbenchError(
                exits.last_line(log_path.read_text(errors="replace"))
                or f"inspecting device {device!r} and the inputs ended with exit code "
                f"{child.returncode} and no answer: does a model's code end its process?"
            )
        return out.read_text()


def run_in_child(
    spec: RunSpec,
    env: Environment,
    timeout_s: float,
    stream: TextIO | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> Result:
    """Run one cell in a fresh process; a crash or timeout becomes the result's status. Its
    output is kept in the log directory, named in the result, and copied to `stream` as it
    comes, if given; `on_phase` is told each phase the cell begins (execution.progress)."""
    # Ranks on other nodes read the spec and write results here: a shared directory under Slurm.
    with tempfile.TemporaryDirectory(prefix="accelbench-", dir=os.environ.get(CELL_DIR)) as tmp:
        spec_path, out, log_path = (
            Path(tmp, "spec.json"),
            Path(tmp, "result.json"),
            Path(tmp, "log"),
        )
        spec_path.write_text(spec.model_dump_json())
        start, oom_kills = time.perf_counter(), exits.oom_kills()
        log_path.touch()
        phases = out.with_name(progress.FILE)
        phases.touch()
        # A session of its own, so a timeout kills the cell's loader workers with it.
        child = _start(spec, [str(spec_path), str(out)], log_path)
        done, followers = threading.Event(), []
        if stream is not None:
            followers.append((log_path, _copied_to(stream)))
        if on_phase is not None:
            followers.append((phases, _by_line(on_phase)))
        threads = [
            threading.Thread(target=_follow, args=(path, write, done), daemon=True)
            for path, write in followers
        ]
        for thread in threads:
            thread.start()
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(child)
            reason = f"no result within the {timeout_s:g} s limit"
            return _kept(Result.new(spec, env, "timeout", reason=reason), log_path)
        except (KeyboardInterrupt, Interrupted) as exc:
            _kill(child)  # asks it to stop and report; its own session would outlive us
            name = exc.signal_name if isinstance(exc, Interrupted) else "Ctrl-C"
            stopped = _stopped(spec, env, out, name, start)
            raise Interrupted(name, _kept(stopped, log_path)) from None
        except BaseException:
            _kill(child)
            raise
        finally:
            done.set()
            for thread in threads:
                thread.join(timeout=5)
        _signal_group(child.pid, signal.SIGKILL)  # what the cell forked and left running
        wall_s = time.perf_counter() - start
        tail = _detail(log_path)
        ranks = sorted(f for f in Path(tmp).glob("result.json.rank*") if f.suffix != ".tmp")
        written = [f for f in (out, *ranks) if f.exists()]
        code = child.wait()
        # A rank killed by a signal: what the others wrote (a broken collective) is its effect.
        killed = exits.rank_killed(_end(log_path, 60)) if code != 0 else None
        if written and killed is None:
            result = _first_failure([Result.model_validate_json(f.read_text()) for f in written])
            return _kept(result.model_copy(update={"wall_s": wall_s}), log_path)
        code = code if killed is None else -killed[1]
        who = "cell process" if killed is None else f"rank {killed[0]} of the cell"
        status, reason = exits.status(code, tail, exits.oom_kills() != oom_kills, who)
        return _kept(Result.new(spec, env, status, reason=reason, detail=tail or None), log_path)


def _first_failure(written: list[Result]) -> Result:
    """The cell's result from what its ranks wrote (rank 0's first, then each failed rank's):
    the failure that came first, where any rank failed, since the others' (a collective broken
    by that rank's end) are its effect; else rank 0's."""
    failed = [r for r in written if r.status not in MEASURED]
    return min(failed, key=lambda r: r.created_at) if failed else written[0]


def _detail(log_path: Path) -> str:
    """The end of the cell's output; where a process crashed in native code, the fault handler's
    report from its start (cell/child.py), as its innermost frames come first."""
    lines = log_path.read_text(errors="replace").splitlines()
    crashed = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error:")]
    start = crashed[-1] if crashed else max(len(lines) - _TAIL_LINES, 0)
    return "\n".join(lines[start : start + _TAIL_LINES])


def _end(log_path: Path, num_lines: int) -> str:
    return "\n".join(log_path.read_text(errors="replace").splitlines()[-num_lines:])


def _kept(result: Result, log_path: Path) -> Result:
    """The result naming its cell's output, copied to the log directory (the cell's own
    directory goes with it); unchanged where the log cannot be written."""
    from accelbench.storage.connect import log_dir

    target = log_dir() / f"{result.created_at:%Y%m%dT%H%M%S%f}-{result.key}.log"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log_path, target)
    except OSError as exc:
        log.warning("the cell's output was not kept at %s: %s", target, exc)
        return result
    return result.model_copy(update={"log_path": str(target)})


def _follow(path: Path, write: Callable[[str], None], done: threading.Event) -> None:
    """Give `write` what a cell writes to a file as it comes, until `done`."""
    with path.open(errors="replace") as file:
        while True:
            finished = done.is_set()
            if text := file.read():
                write(text)
            if finished:
                return
            time.sleep(0.1)


def _copied_to(stream: TextIO) -> Callable[[str], None]:
    def write(text: str) -> None:
        stream.write(text)
        stream.flush()

    return write


def _by_line(on_line: Callable[[str], None]) -> Callable[[str], None]:
    """A writer that calls `on_line` with each whole line it is given, in order."""
    pending = [""]

    def write(text: str) -> None:
        *lines, pending[0] = (pending[0] + text).split("\n")
        for line in lines:
            on_line(line)

    return write


def _stopped(spec: RunSpec, env: Environment, out: Path, name: str, start: float) -> Result:
    """The interrupted cell: what it measured if it reported within the grace period (its
    finished epochs, or all of them if it was about to end), else only how long it ran."""
    wall_s = time.perf_counter() - start
    again = "run the sweep again to run it whole"
    if not out.exists():
        reason = f"stopped by {name} after {wall_s:.1f} s, nothing measured yet; {again}"
        return Result.new(spec, env, "interrupted", reason=reason)
    result = Result.model_validate_json(out.read_text()).model_copy(update={"wall_s": wall_s})
    if result.status != "interrupted":
        return result  # it finished within the grace period: a whole result
    reason = f"stopped by {name} after {wall_s:.1f} s, {result.reason}; {again}"
    return result.model_copy(update={"reason": reason})


def _start(
    spec: RunSpec, cell_args: list[str], log_path: Path
) -> forks.Forked | subprocess.Popen[bytes]:
    """The cell's process, started: forked by the cell server where it is a Python process on
    this host, the cell or torchrun over its ranks. srun over nodes is started afresh, and so
    is a serving client, which measures no torch work: forked, its memory would count the
    server's."""
    argv = command(spec, cell_args)
    client = isinstance(scenarios.get(spec.scenario), scenarios.ClientScenario)
    if argv[0] == sys.executable and not client:
        return forks.fork_or_exec(argv[1:], log_path, preexec_fn=forks.on_parent_death())
    with log_path.open("a") as log:
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=forks.on_parent_death(),
        )


def command(spec: RunSpec, cell_args: list[str]) -> list[str]:
    """The command line that runs a cell: one process, torchrun on this host, or srun + torchrun
    over the nodes of a Slurm allocation."""
    cell = [*forks.CHILD, "cell", *cell_args]
    if not spec.distributed and spec.numa_binding is None:
        return [sys.executable, *cell]
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    torchrun += ["--nproc-per-node", str(spec.processes_per_node)]
    if spec.numa_binding:
        torchrun += ["--numa-binding", spec.numa_binding]
    if spec.nodes == 1:
        return [*torchrun, "--standalone", *_forked_ranks(cell)]
    rendezvous = f"{socket.gethostname()}:{_free_port()}"
    srun = ["srun", "--nodes", str(spec.nodes), "--ntasks-per-node", "1", "--kill-on-bad-exit=1"]
    # Not inherited from the job since Slurm 22.05: each node's torchrun gets the CPUs and memory
    # the job has there, not one core for its ranks and their loader workers to share.
    cpus = os.environ.get("SLURM_CPUS_PER_TASK") or os.environ.get("SLURM_CPUS_ON_NODE")
    srun += [*(["--cpus-per-task", cpus] if cpus else []), "--mem=0"]
    torchrun += ["--nnodes", str(spec.nodes), "--rdzv-backend", "c10d"]
    torchrun += ["--rdzv-endpoint", rendezvous, "--rdzv-id", Path(cell_args[0]).parent.name]
    return [*srun, *torchrun, *_forked_ranks(cell)]


def _forked_ranks(cell: list[str]) -> list[str]:
    """torchrun's arguments that run the cell's ranks: on Linux, forked by torchrun itself
    (--start-method fork, the rank's script run in the forked process with --run-path), so a
    rank has the imports of torchrun's process instead of importing torch again: on this host
    the cell server forked torchrun with the cell's code imported too (about 7 s of CPU a rank
    here); on each node of a Slurm job, its ranks share their torchrun's import of torch from
    the shared file system instead of each reading it. Else (and with ACCELBENCH_FORK_SERVER=0)
    a fresh interpreter each."""
    if sys.platform != "linux" or os.environ.get(forks.SWITCH, "1") == "0":
        return cell
    option, module, *args = cell
    script = importlib.util.find_spec(module)
    assert option == "-m" and script is not None and script.origin is not None
    return ["--run-path", "--start-method", "fork", script.origin, *args]


MAX_PROCESSES_PER_THREAD = 4
"""CPU processes per CPU thread a cell may start, taking turns on the cores."""


def check_launchable(spec: RunSpec, env: Environment) -> None:
    """Raise, naming the fix, if this machine cannot start the cell's ranks as asked."""
    per_node = spec.processes_per_node
    if spec.nodes > 1 and "SLURM_JOB_ID" not in os.environ:
        raise AccelbenchError(
            f"--nodes {spec.nodes} runs inside a Slurm allocation: write its job script with "
            "`accelbench slurm`"
        )
    if env.device_type == "cpu":
        # A few processes per CPU thread still run (sharding can be checked on a laptop), their
        # results flagged contended (validity); many more would only thrash.
        if per_node > MAX_PROCESSES_PER_THREAD * env.num_cpu_threads:
            raise AccelbenchError(
                f"{per_node} CPU processes per node, but this host has {env.num_cpu_threads} CPU "
                "threads: give fewer --replicas or more --nodes"
            )
        if spec.bn_span > 1:
            raise AccelbenchError(
                "torch syncs batch norm on GPUs only: leave --bn-span at 1 on the CPU"
            )
        if spec.numa_binding:
            raise AccelbenchError(
                "torchrun binds ranks to the CPUs near their accelerator: leave out "
                "--numa-binding on the CPU"
            )
    elif per_node > len(env.devices):
        raise AccelbenchError(
            f"{per_node} devices per node asked for, but this node has {len(env.devices)} "
            f"{env.device_type} device(s): give fewer --replicas or more --nodes"
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _kill(child: forks.Forked | subprocess.Popen[bytes]) -> None:
    """SIGTERM first, which torchrun and srun pass on to their ranks, then SIGKILL. The cell
    may have ended on its own meanwhile (Ctrl-C at its very end): then nothing is left to stop."""
    _signal_group(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(child.pid, signal.SIGKILL)
        child.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal every process of the cell's session, if any is left."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)
