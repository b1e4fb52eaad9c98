"""The only module that knows about processes: each cell runs in a fresh child.

A fresh process per cell means CUDA state, peak-memory counters, compiled graphs and an OOM cannot
leak from one cell into the next. Spec and result cross the boundary as JSON files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelbench.environment import Environment
from accelbench.errors import AccelbenchError
from accelbench.result import Result
from accelbench.spec import RunSpec

_TAIL_LINES = 12


def probe_environment(device: str) -> Environment:
    """The platform a cell would see, captured in a child so this process never touches the device."""
    with tempfile.TemporaryDirectory(prefix="accelbench-") as tmp:
        out = Path(tmp, "env.json")
        proc = subprocess.run(
            [sys.executable, "-m", "accelbench.launch", "env", device, str(out)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0 or not out.exists():
            raise AccelbenchError(_last_line(proc.stderr) or f"could not inspect device {device!r}")
        return Environment.model_validate_json(out.read_text())


def run_in_child(spec: RunSpec, env: Environment, timeout_s: float) -> Result:
    """Run one cell in a fresh process; a crash or timeout becomes the result's status."""
    with tempfile.TemporaryDirectory(prefix="accelbench-") as tmp:
        spec_path, out, log_path = (
            Path(tmp, "spec.json"),
            Path(tmp, "result.json"),
            Path(tmp, "log"),
        )
        spec_path.write_text(spec.model_dump_json())
        start = time.perf_counter()
        with log_path.open("w") as log:
            # A session of its own, so a timeout kills the cell's loader workers with it.
            child = subprocess.Popen(
                [sys.executable, "-m", "accelbench.launch", "cell", str(spec_path), str(out)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                child.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(child)
                reason = f"no result within the {timeout_s:g} s limit"
                return Result.new(spec, env, "timeout", reason=reason)
            except BaseException:  # Ctrl-C or a signal: the child's own session would outlive us
                _kill(child)
                raise
        wall_s = time.perf_counter() - start
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-_TAIL_LINES:])
        if out.exists():
            return Result.model_validate_json(out.read_text()).model_copy(update={"wall_s": wall_s})
        reason = _exit_reason(child.returncode, tail)
        return Result.new(spec, env, "error", reason=reason, detail=tail or None)


def _kill(child: subprocess.Popen[bytes]) -> None:
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def _exit_reason(returncode: int, tail: str) -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        hint = " (the host may have run out of memory)" if name == "SIGKILL" else ""
        return f"cell process killed by {name}{hint}"
    return _last_line(tail) or f"cell process exited with code {returncode} and no result"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _child_main(argv: list[str]) -> int:
    from accelbench import environment, runner

    command, arg, out = argv
    try:
        if command == "env":
            text = environment.capture(arg).model_dump_json()
        else:
            text = runner.run(RunSpec.model_validate_json(Path(arg).read_text())).model_dump_json()
    except AccelbenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    tmp = Path(out + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)  # atomic: the parent sees a whole result or none
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
