"""A sweep as the user watches it: on a terminal, a progress line with the cells done and left,
the time left and the cell in flight with its phase (execution.progress); a line per finished
cell; the cells' own output with --verbose."""

from __future__ import annotations

import sys
from functools import partial

from rich.markup import escape
from rich.progress import Progress, TextColumn

from accelbench.cli.app import progress_line
from accelbench.orchestration.sweep import Cell, run_cells
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report import inert
from accelbench.report.cells import describe
from accelbench.report.database import ResultStore
from accelbench.report.results import cell_line


def sweep(
    cells: list[Cell],
    store: ResultStore,
    force: bool,
    timeout_s: float,
    *,
    verbose: bool = False,
    quiet: bool = False,
    tags: dict[str, str] | None = None,
) -> list[Result]:
    """Run the cells with a progress bar, printing each as it finishes (`quiet`: neither), and
    with `verbose`, each cell's output on stderr as it comes."""
    stream = sys.stderr if verbose else None
    sweep = partial(
        run_cells, cells, store, force=force, timeout_s=timeout_s, stream=stream, tags=tags
    )
    if quiet:
        return sweep()
    columns = (*Progress.get_default_columns(), TextColumn("{task.completed}/{task.total} cells"))
    with progress_line(*columns, hidden=verbose) as progress:
        task = progress.add_task("starting", total=len(cells))
        cell = [""]

        def started(spec: RunSpec) -> None:
            cell[0] = escape(inert.plain(describe(spec)))
            progress.update(task, description=f"{cell[0]}: starting")

        def phased(text: str) -> None:
            progress.update(task, description=f"{cell[0]}: {escape(inert.plain(text))}")

        def finished(result: Result, skipped: bool) -> None:
            progress.console.print(cell_line(result, skipped))
            progress.advance(task)

        return sweep(on_start=started, on_result=finished, on_phase=phased)
