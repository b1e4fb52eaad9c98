"""Files a user names (a sweep, prices, an acceptance rule or baselines, a serving trace, lengths
or power series), opened so that a wrong one costs one line: a regular file of a bounded size.
A device or a pipe that never ends (/dev/zero) would otherwise be read until the host's memory
ran out, and a file far larger than its kind ever is would be held whole."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from accelbench.errors import AccelbenchError

MiB = 1 << 20
SETTINGS_BYTES = MiB
"""A TOML file of settings (a sweep, prices, a rule): a few kilobytes."""
TABLE_BYTES = 256 * MiB
"""A CSV file of rows (baselines, a trace, lengths, a power log): by arithmetic, not a measured
log, a day of nvidia-smi's index, timestamp and power each second for eight GPUs is 86,400 x 8
lines of about 85 bytes, some 60 MiB."""


@contextmanager
def opened(path: Path, what: str, limit_bytes: int) -> Iterator[TextIO]:
    """`path` open as UTF-8 text, for CSV's reader too (newline=""), once it is known to be a
    regular file of at most `limit_bytes`; AccelbenchError naming `what` and the fix otherwise.
    A file that grows past the limit while it is read stops there, as one that is too large."""
    try:
        found = path.stat()
    except OSError as exc:
        raise AccelbenchError(f"cannot read {what} {path}: {exc.strerror}") from None
    if not stat.S_ISREG(found.st_mode):
        raise AccelbenchError(f"{what} {path} is not a file: give the path of a file")
    _within(found.st_size, path, what, limit_bytes)
    try:
        with path.open(newline="", encoding="utf-8") as f:
            yield _Bounded(f, path, what, limit_bytes)  # type: ignore[misc]
    except OSError as exc:
        raise AccelbenchError(f"cannot read {what} {path}: {exc.strerror}") from None


def read_text(path: Path, what: str, limit_bytes: int = SETTINGS_BYTES) -> str:
    """The whole text of a file checked as `opened` checks it."""
    with opened(path, what, limit_bytes) as f:
        return f.read()


def _within(size: int, path: Path, what: str, limit_bytes: int) -> None:
    if size > limit_bytes:
        raise AccelbenchError(
            f"{what} {path} is over {limit_bytes / MiB:g} MiB, more than such a file holds: "
            "give the right file"
        )


class _Bounded:
    """A text file that refuses to be read past `limit_bytes` (counted in characters: at most
    the bytes)."""

    def __init__(self, f: TextIO, path: Path, what: str, limit_bytes: int) -> None:
        self._f, self._path, self._what, self._limit = f, path, what, limit_bytes
        self._read = 0

    def _counted(self, text: str) -> str:
        self._read += len(text)
        _within(self._read, self._path, self._what, self._limit)
        return text

    def read(self, size: int = -1) -> str:
        return self._counted(self._f.read(self._limit + 1 if size < 0 else size))

    def readline(self, size: int = -1) -> str:
        return self._counted(self._f.readline(self._limit + 1 if size < 0 else size))

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line
