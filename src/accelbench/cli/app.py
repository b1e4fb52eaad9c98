"""The command line's frame: the Typer app, how errors become exit codes, the options and
helpers that several commands share. The commands are in run.py (commands that run cells) and
results.py (commands that read results); only this package prints; report/ writes the words."""

from __future__ import annotations

import json
import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from typer.core import TyperGroup

from accelbench import launch, workloads
from accelbench.errors import AccelbenchError
from accelbench.report.results import notes, table
from accelbench.report.time_to_train import time_to_train_table
from accelbench.result import Result
from accelbench.spec import RunSpec
from accelbench.store import ResultStore

# Wide enough for the results table when the output goes to a file or a pipe.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


class _Group(TyperGroup):
    """Turns the tool's own errors into one line on stderr and exit code 2; anything else is a
    bug and keeps its traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (AccelbenchError, ValidationError) as exc:
            message = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2) from None
        except launch.Interrupted as exc:
            typer.echo(
                f"interrupted by {exc.signal_name}: finished cells are stored, the one in flight "
                "as interrupted; run the same command again to go on",
                err=True,
            )
            raise typer.Exit(143 if exc.signal_name == "SIGTERM" else 130) from None


app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    help="Benchmark AI/ML workloads on the accelerators you have, and keep the numbers.",
)


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def spec_help(field: str) -> str:
    return RunSpec.model_fields[field].description or ""


def job_help(field: str) -> str:
    from accelbench.slurm import JobSpec

    return JobSpec.model_fields[field].description or field.replace("_", " ").capitalize() + "."


OPTION_NAMES = {"repeat": "repeats", "ci_pct": "ci"}
"""Spec fields whose command-line parameter has another name."""


def validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if not error["loc"]:  # a rule over several settings, which names them itself
        return error["msg"].removeprefix("Value error, ")
    field = "-".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown setting {field!r}: `accelbench run --help` lists them"
    option = "--" + OPTION_NAMES.get(field, field).replace("_", "-")
    if not option.isprintable():
        option = repr(option)
    if error["type"] == "missing":
        return f"{option} is required: give it on the command line or in the sweep file"
    return f"invalid value {error.get('input')!r} for {option}: {error['msg']}"


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


def load(
    dbs: list[str] | None, workload: str | None, platform: str | None, status: str | None = None
) -> tuple[list[Result], list[str]]:
    """Results from each database, oldest first, a result in several counted once (by key);
    and where they came from."""
    if workload is not None:
        workloads.check_name(workload)
    found: dict[str, Result] = {}
    sources = []
    wheres: list[str | None] = list(dbs) if dbs else [None]
    for where in wheres:
        with ResultStore(where, writable=False) as store:
            sources.append(store.where)
            for r in store.query(workload=workload, platform=platform, status=status):
                found.setdefault(r.key, r)
    return sorted(found.values(), key=lambda r: r.created_at), sources


def emit(text: str, out: Path | None, wrote: str) -> None:
    """Print `text`, or write it to `out` (whole or not at all: a reader never sees half a
    file) and say `wrote`."""
    if out is None:
        print(text, end="")
        return
    partial = out.with_name(f".{out.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(out)
    console.print(wrote)


LatencyBoundOption = Annotated[
    float | None,
    typer.Option(
        help="Inference: also name the highest throughput whose p99 latency is within this, ms. "
        "Server scenario: the bound its rate search keeps to.",
        min=0,
    ),
]


def percent(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.strip().removesuffix("%"))
    except ValueError:
        raise AccelbenchError(f"--ci {text!r}: give a percentage such as 2%") from None


def key_values(pairs: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; a value that reads as JSON (2, 0.1, true) is that, else a string."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise AccelbenchError(f"--model-arg {pair!r}: write it as KEY=VALUE, e.g. seq_len=128")
        try:
            out[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            out[key.strip()] = text
    return out


def show(results: list[Result], latency_bound_ms: float | None = None) -> None:
    console.print(table(results))
    time_to_train = time_to_train_table(results)
    if time_to_train is not None:
        console.print(time_to_train)
    for line in notes(results, latency_bound_ms):
        console.print(line)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
