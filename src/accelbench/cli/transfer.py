"""Commands that move results between machines and tools: export (JSON, JSON Lines, MLPerf
logs) and import."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from accelbench import scenarios
from accelbench.cli.app import (
    DbOption,
    DbsOption,
    PlatformFilter,
    StatusFilter,
    WorkloadFilter,
    app,
    check_filters,
    check_out,
    console,
    progress_line,
    reads,
    write_file,
    write_stream,
)
from accelbench.cli.options import choice
from accelbench.errors import AccelbenchError
from accelbench.records import contention
from accelbench.records.result import Result
from accelbench.report.database import ResultStore
from accelbench.storage import exchange
from accelbench.storage.schema import Row
from accelbench.storage.several import stream_all, texts_all

T = TypeVar("T")

FIELD_FORMATS = scenarios.exports()
"""The field's formats, each written by the scenarios whose results it describes."""
ExportFormat = choice("ExportFormat", ["json", "jsonl", *FIELD_FORMATS])
JSON = ExportFormat("json")


@app.command()
@reads
def export(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    status: StatusFilter = None,
    out_text: Annotated[
        str | None,
        typer.Option(
            "--out",
            help="Write here, not to standard output; a folder (DIR/, or one that exists): a file "
            "a document, for the formats whose tools read one a file.",
        ),
    ] = None,
    format: Annotated[
        ExportFormat,  # type: ignore[valid-type]  # the registry's formats
        typer.Option(
            help="json: one document; jsonl: a header line, then one result a line, written "
            "and imported a result at a time (for large sets); "
            + "; ".join(f"{name}: {e.help}" for name, e in FIELD_FORMATS.items())
            + " (the field's formats are not for import).",
        ),
    ] = JSON,
    db: DbsOption = None,
) -> None:
    """Stored results as JSON, for `accelbench import` on another machine; or training runs as
    MLPerf logs, serving trials as llm-d benchmark reports."""
    field = FIELD_FORMATS.get(format)
    out = None if out_text is None else Path(out_text)
    folder = out_text is not None and _is_folder(out_text)
    if folder and (field is None or field.files is None):
        raise AccelbenchError(
            f"--out {out} is a folder, and {format} is written to one file: give a file path"
        )
    if out is not None:
        check_out(out, "a folder" if folder else "a file")
    check_filters(workload, platform, status)
    filters = {"workload": workload, "platform": platform, "status": status}
    if folder and field is not None and field.files is not None:
        assert out is not None
        out.mkdir(exist_ok=True)
        written, left_out = _files(field.files, stream_all(db, **filters), out)
        if left_out:
            typer.echo(f"{left_out} result(s) are not {field.takes}: left out", err=True)
        console.print(f"wrote {written} {field.writes} to {out}, a file each")
        return
    if field:  # a result at a time, other kinds left out
        writer, each = field.write, stream_all(db, **filters)
        written, left_out = (
            writer(each, sys.stdout)
            if out is None
            else write_stream(out, lambda f: writer(each, f))
        )
        if left_out:
            typer.echo(f"{left_out} result(s) are not {field.takes}: left out", err=True)
        if out is not None:
            console.print(f"wrote {written} {field.writes} to {out}")
        return
    write = exchange.write_document if format == "json" else exchange.write_lines
    texts = texts_all(db, **filters)  # copied as stored: no record read
    if out is None:  # either format a result at a time: memory holds one
        write(texts, sys.stdout)
        return
    count = write_stream(out, lambda f: write(texts, f))
    console.print(f"wrote {count} results to {out}")


def _is_folder(text: str) -> bool:
    """Whether --out names a folder: DIR/, or one that exists."""
    try:
        return text.endswith("/") or Path(text).is_dir()
    except OSError:  # a name the system cannot hold: check_out says so
        return False


def _files(
    files: Callable[[Result], list[tuple[str, str]]], results: Iterable[Result], folder: Path
) -> tuple[int, int]:
    """Each result's documents into a file each in `folder` (whole or not at all); returns
    (files written, results that have none)."""
    written = left_out = 0
    for result in results:
        found = files(result)
        left_out += not found
        for name, text in found:
            write_file(folder / name, text)
            written += 1
    return written, left_out


@app.command("import")
@reads
def import_results(
    files: Annotated[
        list[Path],
        typer.Argument(help="Files made by `accelbench export`, or accelbench SQLite databases."),
    ],
    db: DbOption = None,
    jobs: Annotated[
        int,
        typer.Option(
            help="Processes that read, check and list a JSON Lines file's results while this one "
            "stores them: give the CPUs that are free for it. 1: this process alone; any other "
            "file is read by this one.",
            min=1,
        ),
    ] = 1,
) -> None:
    """Merge results from other machines into the database. A malformed file changes nothing:
    every file is read a result at a time into one transaction, undone at the first bad
    result. Results stored already (same key) are kept as they are."""
    if jobs > (cpus := contention.usable_cpus()):
        raise AccelbenchError(
            f"--jobs {jobs} is more than the {cpus} CPUs here: give {cpus} or fewer"
        )
    with ResultStore(db) as store, _shown() as progress:

        def read_file(path: Path) -> Iterator[Result | Row]:
            if not exchange.is_lines(path):
                return exchange.load(path)
            if jobs == 1:
                return exchange.read_lines(path)
            return exchange.stored_lines(path, store.lister, jobs)

        new, read = store.add_stream(progress(r for path in files for r in read_file(path)))
        where = store.where
    console.print(
        f"imported {new} new results into {where}; {read - new} were stored already "
        "(same cell, same platform)"
    )


@contextmanager
def _shown() -> Iterator[Callable[[Iterable[T]], Iterator[T]]]:
    """On a terminal, a line that counts the results read as they are (an import of 1M
    results took 12 minutes here); nothing where stderr goes to a file."""
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.completed:,} results read"), TimeElapsedColumn())
    with progress_line(*columns) as progress:
        task = progress.add_task("import", total=None)

        def counted(results: Iterable[T]) -> Iterator[T]:
            for result in results:
                yield result
                progress.advance(task)

        yield counted
