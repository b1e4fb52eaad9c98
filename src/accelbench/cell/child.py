"""The entry point of a cell's or a probe's process: `python -m accelbench.cell.child cell|env|check ...`,
the child's side of launch.py: it measures (or probes) and writes its answer to a file.

A module the package does not import, so that runpy finds nothing to warn about (which, printed
first, became the reason of a cell that died without one)."""

import faulthandler
import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

from accelbench.cell import preflight
from accelbench.errors import AccelbenchError
from accelbench.execution import interruption, progress
from accelbench.records.result import MEASURED
from accelbench.records.spec import RunSpec

PEER_GRACE_S = 2.0
"""How long a failed rank torchrun forked waits before it ends (torchrun looks every 0.1 s)."""


def child_main(argv: list[str]) -> int:
    """What the child does; its exit code (2: a problem the user can fix, said on stderr)."""
    from accelbench.cell import runner
    from accelbench.cell.environment import capture

    what, arg, out, *inputs = argv
    # A crash in native code (a segfault in a framework's kernels or collectives) leaves the
    # Python stack of each thread in the cell's output, which the result's detail keeps.
    faulthandler.enable()
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    forked = world_size > 1 and multiprocessing.parent_process() is not None  # by torchrun
    if world_size == 1:  # ranks must stop together: torchrun's SIGTERM ends them as before
        interruption.stop_on_sigterm()
    elif forked:
        _as_a_fresh_rank()
    progress.report_to(Path(out).with_name(progress.FILE) if what == "cell" and rank == 0 else None)
    failed = False
    try:
        if what in ("env", "check"):
            text = capture(arg).model_dump_json() if what == "env" else "{}"
            todo = json.loads(Path(inputs[0]).read_text()) if inputs else []
            preflight.check([preflight.Inputs.model_validate(i) for i in todo])
        else:
            result = runner.run(RunSpec.model_validate_json(Path(arg).read_text()))
            failed = result.status not in MEASURED
            text = result.model_dump_json()
    except AccelbenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    if rank == 0 or failed:
        path = Path(out if rank == 0 else f"{out}.rank{rank}")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)  # atomic: the parent sees a whole result or none
    # A failed rank exits with an error so that torchrun stops the ranks still waiting for it.
    code = 1 if failed and world_size > 1 else 0
    if forked:
        # torchrun reports one failed rank of those it forked, the first it finds ended: a
        # rank failed by a peer's death (a broken collective) leaves late enough for torchrun
        # to find the peer, killed by a signal, first. It returns to torchrun's code, which
        # leaves without the interpreter's teardown.
        time.sleep(PEER_GRACE_S if code else 0)
        return code
    if world_size > 1:
        # Its result is written: leave without the interpreter's teardown, where gloo's threads
        # can abort the process ("terminate called without an active exception", under load),
        # and then another node's torchrun waits out its 300 s exit barrier for this one.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _as_a_fresh_rank() -> None:
    """A rank torchrun forked (launch.py's --start-method fork) starts as one it started afresh
    would: without torchrun's signal handlers, which raise inside the model's code, and with the
    CPU threads torchrun gives it (OMP_NUM_THREADS, one unless set), which torch read at its
    import in the cell server, under the sweep's environment."""
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if threads := os.environ.get("OMP_NUM_THREADS"):
        import torch

        torch.set_num_threads(int(threads))


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
