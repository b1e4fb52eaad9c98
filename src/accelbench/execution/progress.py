"""A cell's phases, for the sweep's progress display: the child appends a line to a file beside
its result as each phase begins (building, each epoch, each serving trial), between timed spans,
never inside one; the sweep follows the file (orchestration.launch). A line, not a step count:
nothing is written per step."""

from __future__ import annotations

from pathlib import Path

FILE = "phases"
"""The file's name, beside the cell's result file."""
_to: list[Path] = []
"""Where this process reports: set by the cell's child on rank 0 only (report_to)."""


def report_to(path: Path | None) -> None:
    _to[:] = [] if path is None else [path]


def phase(text: str) -> None:
    """Say that a phase begins; nothing where no one follows, and nothing if the file cannot be
    written (the display is a courtesy, the measurement is not to fail for it)."""
    for path in _to:
        try:
            with path.open("a", encoding="utf-8") as f:
                f.write(" ".join(text.split()) + "\n")
        except OSError:
            pass


def epoch_text(index: int, planned: int) -> str:
    """The phase of epoch `index` (from 0) of `planned`."""
    if index == 0:
        return f"epoch 1 of {planned} (warm-up and compilation)" if planned > 1 else "epoch 1 of 1"
    if index < planned:
        return f"epoch {index + 1} of {planned}"
    return f"epoch {index + 1} (more, for the interval's target)"
