"""The entry point of a cell's or a probe's process: `python -m accelbench.cell.child cell|env|check ...`,
the child's side of launch.py: it measures (or probes) and writes its answer to a file.

A module the package does not import, so that runpy finds nothing to warn about (which, printed
first, became the reason of a cell that died without one)."""

import json
import os
import sys
from pathlib import Path

from accelbench.cell import preflight
from accelbench.errors import AccelbenchError
from accelbench.execution import interruption, progress
from accelbench.records.result import MEASURED
from accelbench.records.spec import RunSpec


def child_main(argv: list[str]) -> int:
    """What the child does; its exit code (2: a problem the user can fix, said on stderr)."""
    from accelbench.cell import runner
    from accelbench.cell.environment import capture

    what, arg, out, *inputs = argv
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:  # ranks must stop together: torchrun's SIGTERM ends them as before
        interruption.stop_on_sigterm()
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
    if world_size > 1:
        # Its result is written: leave without the interpreter's teardown, where gloo's threads
        # can abort the process ("terminate called without an active exception", under load),
        # and then another node's torchrun waits out its 300 s exit barrier for this one.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
