"""How a cell that left no result ended, from its exit code, the end of its output (torchrun's
failure report names the rank that failed first) and the cgroup's out-of-memory kills."""

from __future__ import annotations

import re
import signal
from pathlib import Path

from accelbench.records.result import Status


def status(
    returncode: int, tail: str, oom_killed: bool, who: str = "cell process"
) -> tuple[Status, str]:
    """How a cell that left no result ended (`who`: its process, or a rank of it). Killed by
    the out-of-memory killer: oom. Killed by SIGKILL from elsewhere: interrupted, so the next
    run of the sweep runs it again. Exited with 0 and no result: the model's code ended it."""
    if returncode == -signal.SIGKILL:
        if oom_killed:
            return "oom", f"{who} killed by the out-of-memory killer (its cgroup's oom_kill rose)"
        return (
            "interrupted",
            f"{who} killed by SIGKILL from outside the sweep; run the sweep again to run it",
        )
    if returncode < 0:
        return "error", f"{who} killed by {signal.Signals(-returncode).name}"
    if returncode == 0:  # its output is the model's own, not a reason
        return "error", (
            f"{who} exited with code 0 and no result: does the model's code end the process "
            "(sys.exit, os._exit)?"
        )
    return "error", last_line(tail) or f"{who} exited with code {returncode} and no result"


_FAILURE = re.compile(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)")
"""A failure in torchrun's report: the rank, and its exit code (-N: killed by signal N)."""


def rank_killed(tail: str) -> tuple[int, int] | None:
    """(rank, signal) of a rank torchrun reports killed by a signal from outside: its root cause
    if a signal ended that rank, else a rank killed by SIGKILL (a peer's broken collective can
    be observed first; the SIGTERM torchrun sends the survivors is its own, not a cause)."""
    root = tail.rfind("Root Cause")
    found = [(int(r), int(c)) for r, c in _FAILURE.findall(tail[root:] if root >= 0 else "")]
    found += [(int(r), int(c)) for r, c in _FAILURE.findall(tail)]
    for index, (rank, code) in enumerate(found):
        if code == -signal.SIGKILL or (index == 0 and root >= 0 and code < 0):
            return rank, -code
    return None


def oom_kills() -> int | None:
    """The out-of-memory kills in this process's cgroup so far (cgroup v2), if readable."""
    try:
        events = Path("/sys/fs/cgroup/memory.events").read_text()
    except OSError:
        return None
    counts = dict(line.split() for line in events.splitlines() if line.count(" ") == 1)
    return int(counts.get("oom_kill", 0))


def last_line(text: str) -> str:
    """The last line that says something (torchrun ends its failure report with a rule)."""
    lines = [line.strip() for line in text.splitlines() if line.strip().strip("=-")]
    return lines[-1] if lines else ""
