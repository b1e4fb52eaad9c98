"""A polite stop for a cell: SIGTERM (a sweep stopped by Slurm's time limit or Ctrl-C, passed
on by the launcher) asks the cell to finish the epoch in flight and report what it measured, as
an interrupted result, within the launcher's grace period, rather than die with it."""

from __future__ import annotations

import signal
import threading

_requested = threading.Event()


def stop_on_sigterm() -> None:
    """From now on SIGTERM asks for a stop instead of ending the process."""
    signal.signal(signal.SIGTERM, lambda signum, frame: _requested.set())


def requested() -> bool:
    return _requested.is_set()
