"""The cell server: `python -m accelbench.cell.server`, one process per sweep (kept for the next
sweep of the same process) that has imported torch and accelbench's cell code once, and forks a
fresh process for each cell, probe or torchrun over a cell's ranks.

A cell still runs in a process of its own, in a session of its own, that ends with it, so an
OOM, a crash, CUDA's state or a global setting changed in a cell cannot reach the next; only
the seconds of importing torch and its lazy parts are paid once instead of per cell. This
process imports and runs nothing else: no tensor op (OpenMP's threads do not survive a fork)
and no CUDA call, which a forked process could not use again (CUDA starts in the cell only).

Protocol, one JSON object a line: the sweep writes {"argv", "log", "cwd", "env"} on stdin (argv:
what follows `python`, -m MODULE ...: the cell's child.py, or torchrun over its ranks); this
answers {"pid"} when the cell has started and {"returncode"} (negative: killed by that signal)
when it has ended, as subprocess reports it, then reads the next request. "ready" comes first,
once torch is imported (the sweep reads its database meanwhile); the rest of a cell's imports
are done before the first request is forked. A module the package does not import, as child.py is.
"""

import json
import os
import runpy
import signal
import sys
import traceback
from typing import Any

CHILD = "accelbench.cell.child"
"""The module of a cell or a probe."""
NAME = "accelbench-cell"
"""A forked cell's process name (its command line is the server's)."""
WARM = ("torch", "torch._dynamo", "torch.optim", "torch.utils.data")
"""Modules every cell imports; torch._dynamo is the optimizer's lazy import (1-4 s)."""


def main() -> int:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever an import prints goes to the server's log, not into the protocol
    # Should anything ask whether CUDA is there, torch asks NVML, which leaves CUDA unstarted.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    # The sweep stops a cell, not this: it ends when its input does, or with the sweep.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch  # all that the first request (the sweep's probe of the platform) needs

    if _cuda_started(torch):
        return 3
    replies.write("ready\n")
    server, warm = os.getpid(), False
    for line in sys.stdin:
        request = json.loads(line)
        if not warm:  # before the first fork (the probe), whose checks on the meta device use
            _warm()  # them too: forked before, it imported them again itself (1.3 s of CPU)
            warm = True
        sys.stdout.flush()
        sys.stderr.flush()  # or the cell would write what is buffered here into its log
        pid = os.fork()
        if pid == 0:
            _cell(request, replies.fileno(), server)
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        if _cuda_started(torch):
            return 3
    return 0


def _cuda_started(torch: Any) -> bool:
    """Whether an import started CUDA here, which a forked cell could not use: the sweep then
    starts its cells in fresh interpreters."""
    if torch.cuda.is_initialized():
        print("an import started CUDA in the cell server: cells start afresh", file=sys.stderr)
        return True
    return False


def _warm() -> None:
    import importlib

    for name in WARM:
        importlib.import_module(name)
    from accelbench import scenarios
    from accelbench.cell import child, runner  # noqa: F401

    for scenario in scenarios.all_scenarios():
        if not isinstance(scenario, scenarios.ClientScenario):
            scenario.measure_fn()


def _cell(request: dict[str, Any], replies: int, server: int) -> None:
    """In the forked process: become the cell that `python -m accelbench.cell.child` would be,
    and exit with its code; never returns."""
    code = 1
    try:
        os.setsid()  # a session of its own: the sweep stops it and what it forks as one group
        _die_with(server)
        os.close(replies)
        null, log = os.open(os.devnull, os.O_RDONLY), os.open(request["log"], os.O_WRONLY)
        os.dup2(null, 0)
        for fd in (1, 2):
            os.dup2(log, fd)
        os.close(null)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        option, module, *args = request["argv"]
        assert option == "-m", request["argv"]
        if module == CHILD:  # imported here already: runpy would warn of it, into the log
            from accelbench.cell.child import child_main

            code = child_main(args)
        else:  # torchrun over a cell's ranks, which it starts afresh
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with(server: int) -> None:
    """Linux: the cell is killed when this server dies (with the sweep, which can store
    nothing more: finishing the epoch in flight would be wasted), and its process is named
    NAME."""
    if sys.platform != "linux":
        return
    import ctypes

    prctl = ctypes.CDLL(None).prctl
    prctl(15, NAME.encode())  # PR_SET_NAME: what ps -o comm and top show for the cell
    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != server:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Nothing is left to tear down: the interpreter's own teardown with torch loaded took about
    # a second, which every sweep waited for at its end.
    os._exit(code)
