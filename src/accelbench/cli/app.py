"""The command line's frame: the Typer app, how errors become exit codes, the options and
helpers that several commands share. The commands are in run.py (commands that run cells) and
results.py (commands that read results); only this package prints; report/ writes the words."""

from __future__ import annotations

import functools
import json
import logging
import math
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TextIO, TypeVar, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from typer.core import TyperGroup

from accelbench import scenarios, workloads
from accelbench.cli.options import OPTION_NAMES
from accelbench.errors import AccelbenchError, missing_extra
from accelbench.orchestration import launch
from accelbench.records.frozen import Frozen
from accelbench.records.result import Result, Status
from accelbench.report import answers, inert, tables
from accelbench.report.database import uncollected
from accelbench.report.results import Records, Rows, grid, listed, row_notes
from accelbench.secrets import scrub, scrubbing_filter
from accelbench.storage.several import query_all

if TYPE_CHECKING:
    from rich.progress import Progress


class _Console(Console):
    """A console where every string printed is inert (report.inert.terminal): names and
    reasons from stored results are never read as markup or control sequences."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(inert.terminal(o) if isinstance(o, str) else o for o in objects), **kwargs)


# Wide enough for the results table when the output goes to a file or a pipe.
console = _Console(
    highlight=False, markup=False, emoji=False, width=None if sys.stdout.isatty() else 240
)
stderr_console = _Console(
    stderr=True,
    highlight=False,
    markup=False,
    emoji=False,
    width=None if sys.stderr.isatty() else 240,
)
"""Progress, a line per cell and warnings: stderr, so that stdout holds the answer alone."""


def progress_line(*columns: Any, hidden: bool = False) -> Progress:
    """A progress line on stderr that goes once done, shown on a terminal only (`hidden`: not at
    all): where stderr is a file or a pipe, rich's would leave an empty line after the output."""
    from rich.progress import Progress

    shown = stderr_console.is_terminal and not hidden
    return Progress(*columns, console=stderr_console, transient=True, disable=not shown)


class _Group(TyperGroup):
    """Turns the tool's own errors into one line on stderr and exit code 2; anything else is a
    bug and keeps its traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (AccelbenchError, ValidationError) as exc:
            message = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            typer.echo(f"error: {inert.line(scrub(message))}", err=True)
            raise typer.Exit(2) from None
        except ModuleNotFoundError as exc:  # an optional module: the extra that installs it
            if (extra := missing_extra(exc)) is None:
                raise
            command = f"accelbench {ctx.invoked_subcommand or ''}".strip()
            typer.echo(f"error: {command} {extra}", err=True)
            raise typer.Exit(2) from None
        except typer.TyperException as exc:  # a usage error: one line too, not a usage page
            if type(exc).__name__ == "NoArgsIsHelpError":
                raise
            message = exc.format_message().replace("Value error, ", "")
            command = f"accelbench {ctx.invoked_subcommand or ''}".strip()
            typer.echo(f"error: {inert.line(scrub(message))} (see `{command} --help`)", err=True)
            raise typer.Exit(2) from None
        except launch.Interrupted as exc:
            finished = exc.result is not None and exc.result.status != "interrupted"
            in_flight = "finished in time and is stored" if finished else "is stored as interrupted"
            typer.echo(
                f"interrupted by {exc.signal_name}: finished cells are stored, the one in flight "
                f"{in_flight}; run the same command again to go on",
                err=True,
            )
            raise typer.Exit(143 if exc.signal_name == "SIGTERM" else 130) from None


app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Benchmark AI/ML workloads on the accelerators you have, and keep the numbers.",
)


def _print_version(asked: bool) -> None:
    if asked:
        from accelbench import __version__
        from accelbench.cell.environment import accelbench_commit

        commit = accelbench_commit()
        typer.echo(f"accelbench {__version__}" + (f" (commit {commit})" if commit else ""))
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version (and the git commit of a checkout) and exit.",
            is_eager=True,
            callback=_print_version,
        ),
    ] = False,
) -> None:
    """Benchmark AI/ML workloads on the accelerators you have, and keep the numbers."""


P = ParamSpec("P")
R = TypeVar("R")


def reads(command: Callable[P, R]) -> Callable[P, R]:
    """A command that reads results (or imports them) and exits, run with the cyclic garbage
    collector off: what it builds from a database is hundreds of thousands of long-lived objects
    with no cycle, and each full pass walked them all. Without those passes, at 100k results, the
    HTML report took 0.70x the CPU time, the Markdown report and history 0.84x, an import 0.82x;
    peak memory moved by 2 MB or less."""

    @functools.wraps(command)
    def uncollected_command(*args: P.args, **kwargs: P.kwargs) -> R:
        with uncollected():
            return command(*args, **kwargs)

    return uncollected_command


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


class AnswerFormat(StrEnum):
    table = "table"
    json = "json"


AnswerOption = Annotated[
    AnswerFormat,
    typer.Option(
        "--format",
        help="table, or json: one document on standard output, its schema in docs/schemas/.",
    ),
]


def print_answer(answer: Frozen) -> None:
    """A command's answer as JSON (report.answers), the whole of standard output."""
    sys.stdout.write(answers.dump(answer))


def validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if not error["loc"]:  # a rule over several settings, which names them itself
        return error["msg"].removeprefix("Value error, ")
    field, message = "-".join(str(part) for part in error["loc"]), error["msg"]
    branches = [
        e
        for e in exc.errors()
        if e["loc"][:1] == error["loc"][:1] and e.get("input") == error.get("input")
    ]
    if len(branches) > 1:  # a union (a count or "auto"): the setting, and why each failed
        field = str(error["loc"][0])
        message = "; or ".join(dict.fromkeys(e["msg"] for e in branches))
    if error["type"] == "extra_forbidden":
        return f"unknown setting {field!r}: `accelbench run --help` lists them"
    option = "--" + OPTION_NAMES.get(field, field).replace("_", "-")
    if not option.isprintable():
        option = repr(option)
    if error["type"] == "missing":
        return f"{option} is required: give it on the command line or in the sweep file"
    return f"invalid value {error.get('input')!r} for {option}: {message}"


def split(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values:
        raise AccelbenchError(f"empty list {text!r}: give one value or several separated by commas")
    return values


DbOption = Annotated[
    str | None,
    typer.Option(
        help="Results database: an SQLite file, or a PostgreSQL URL (postgresql://user@host/db) "
        "shared by a site. Default: $ACCELBENCH_DB, else ~/.local/share/accelbench/results.sqlite."
    ),
]


DbsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--db",
        help="Results database(s) to read, merged (repeat --db for each machine's): SQLite files or "
        "PostgreSQL URLs. Default: as for `run`.",
    ),
]
WorkloadFilter = Annotated[str | None, typer.Option(help="Only this workload.")]
PlatformFilter = Annotated[
    str | None, typer.Option(help="Only platforms whose name contains this.")
]
StatusFilter = Annotated[
    str | None,
    typer.Option(
        help="Only this status: ok, diverged, not-converged, oom, error, timeout, interrupted."
    ),
]


def check_filters(workload: str | None, platform: str | None, status: str | None) -> None:
    """Refuse a filter that can match nothing by mistake: an unknown workload or status."""
    if workload is not None:
        workloads.check_name(workload)
    if platform is not None and len(platform) > 200:
        raise AccelbenchError("--platform is over 200 characters: give a part of the name")
    if status is not None and status not in get_args(Status):
        raise AccelbenchError(f"--status {status!r}: give one of {', '.join(get_args(Status))}")


def load(
    dbs: list[str] | None, workload: str | None, platform: str | None, status: str | None = None
) -> tuple[list[Result], list[str]]:
    """several.query_all after the filters are checked."""
    check_filters(workload, platform, status)
    return query_all(dbs, workload=workload, platform=platform, status=status)


def check_out(out: Path, what: str = "a file", option: str = "--out") -> None:
    """Refuse an output path that is not a writable place for `what`, before any work: an
    empty name or one with a NUL, a folder or device where a file goes, a missing parent
    folder, a name the system cannot hold."""
    if not str(out).strip() or str(out) == ".":
        raise AccelbenchError(f"{option} is empty: give a path")
    if "\x00" in str(out):  # which the system's calls refuse with a ValueError, not an OSError
        raise AccelbenchError(
            f"{option} holds a NUL character, which no file name can: give a path"
        )
    wants_folder = what == "a folder"
    try:
        here = out.exists()
        if here and (out.is_dir() != wants_folder or not (out.is_dir() or out.is_file())):
            raise AccelbenchError(f"{out} is not {what}: give {option} another path")
        if not out.parent.is_dir():
            raise AccelbenchError(f"no folder {out.parent}: create it first, or give another path")
    except OSError as exc:
        raise AccelbenchError(f"{option} {str(out)[:80]!r}: {exc.strerror}") from None


def write_file(out: Path, text: str, mode: int | None = None) -> None:
    """Write `text` to `out` whole or not at all (write_stream)."""
    write_stream(out, lambda f: f.write(text), mode)


W = TypeVar("W")


def write_stream(out: Path, write: Callable[[TextIO], W], mode: int | None = None) -> W:
    """Let `write` fill `out` whole or not at all (a reader never sees half a file): a
    temporary file beside it, renamed over it, and removed if anything fails (an error
    `write` raises included). Returns what `write` returns."""
    check_out(out)
    partial = out.with_name(f".{out.name}.partial")
    try:
        with partial.open("w", encoding="utf-8") as f:
            written = write(f)
        if mode is not None:
            partial.chmod(mode)
        partial.replace(out)
        return written
    except OSError as exc:
        raise AccelbenchError(
            f"cannot write {out} ({exc.strerror}): give --out another path"
        ) from None
    finally:
        partial.unlink(missing_ok=True)


LatencyBoundOption = Annotated[
    float | None,
    typer.Option(
        help="Inference: also name the highest throughput whose p99 latency is within this, ms. "
        "Server scenario: the bound its rate search keeps to.",
        min=0,
    ),
]


def percent(text: str | None, option: str = "--ci") -> float | None:
    """A percentage such as 2% or 2, above 0 and below 100."""
    if text is None:
        return None
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not 0 < value < 100:
        raise AccelbenchError(
            f"{option} {text!r}: give a percentage above 0 and below 100, e.g. 2%"
        )
    return value


def counts(text: str, option: str) -> list[int]:
    """A comma list of distinct positive whole numbers, sorted."""
    found = set()
    for part in text.split(","):
        if not part.strip().isdigit() or not 0 < int(part) <= MAX_COUNT:
            raise AccelbenchError(
                f"{option} {text!r}: give whole numbers from 1 to {MAX_COUNT:,}, comma separated"
            )
        found.add(int(part))
    return sorted(found)


MAX_COUNT = 100_000


def key_values(
    pairs: list[str], option: str = "--model-arg", *, typed: bool = True
) -> dict[str, Any]:
    """KEY=VALUE pairs; with `typed`, a value that reads as JSON (2, 0.1, true) is that, else
    a string; without, every value a string as written."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise AccelbenchError(f"{option} {pair!r}: write it as KEY=VALUE")
        if not typed:
            out[key.strip()] = text
            continue
        try:
            out[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            out[key.strip()] = text
        except ValueError:  # a number of thousands of digits
            raise AccelbenchError(f"{option} {key.strip()}: the value is too long") from None
    return out


PLAIN_ABOVE = 1000
"""Results above which the table is printed as plain fixed-width text (tables.text), not laid
out by rich: a site database's listing then takes seconds, not minutes."""


def show_grid(grid: tables.Grid) -> None:
    """A table in the terminal: laid out by rich, or as plain text when it is long."""
    if len(grid.rows) > PLAIN_ABOVE:
        sys.stdout.writelines(tables.text_lines(grid))
    else:
        console.print(tables.rich(grid))


def show(results: list[Result], latency_bound_ms: float | None = None) -> None:
    show_rows(*listed(results), latency_bound_ms)


def show_rows(rows: Rows, records: Records, latency_bound_ms: float | None = None) -> None:
    """The results table and its notes; long ones as plain text."""
    show_grid(grid(rows))
    for own in scenarios.tables(records([r.key for r in rows.rows if r.whole])):
        console.print(tables.rich(own))
    lines = row_notes(rows, records, latency_bound_ms)
    if len(rows.rows) > PLAIN_ABOVE:  # a line through rich takes half a millisecond
        sys.stdout.writelines(inert.plain(line) + "\n" for line in lines)
    else:
        for line in lines:
            console.print(line)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # a logged URL or key shows no secret
        handler.addFilter(scrubbing_filter)
    app()
