"""The command that runs cells: run (with its sweep files and suites)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from accelbench import scenarios
from accelbench.analysis import validity
from accelbench.cli import progress
from accelbench.cli.app import (
    AnswerFormat,
    AnswerOption,
    DbOption,
    LatencyBoundOption,
    app,
    console,
    key_values,
    percent,
    print_answer,
    show,
    split,
    stderr_console,
)
from accelbench.cli.options import OPTION_NAMES, PanelledCommand, panel, spec_help, with_fields
from accelbench.errors import AccelbenchError
from accelbench.execution.meters.host import BusySince
from accelbench.orchestration import forks, launch
from accelbench.orchestration.sweep import (
    DEFAULT_TIMEOUT_S,
    Cell,
    SweepFile,
    load_sweep,
    plan,
    stored_result,
)
from accelbench.records import contention, environment
from accelbench.records.result import MEASURED, Result
from accelbench.records.spec import MAX_REPEATS, RunSpec, knobs, owners
from accelbench.report import answers
from accelbench.report.cells import describe
from accelbench.report.database import ResultStore
from accelbench.report.results import listed

AXES = (
    "batch_size",
    "precision",
    "framework",
    "grad_accum",
    "replicas",
    "tensor_parallel",
    "pipeline_stages",
    "workers",
    "prompt_tokens",
    "new_tokens",
    "rate_per_s",
)
"""Spec fields that take a comma list on the command line, each value a cell of the grid."""
OWN = (
    "workload",
    "repeat",
    "seed",
    "model_args",
    "ci_pct",
    "latency_bound_ms",
    "slo_ttft_ms",
    "slo_tpot_ms",
    "code_digest",
)
"""Spec fields with an option of their own form (--repeats N, --seeds N, --model-arg K=V, --ci 2%,
--latency-bound-ms also naming inference headlines, --slo ttft_ms=X,tpot_ms=Y), or none
(code_digest, which the sweep sets)."""
KNOBS = tuple(name for name in knobs() if name not in (*AXES, *OWN))
"""Every other spec field: an option derived from the spec (cli.options.field_options)."""


def _axis(name: str, what: str = "a sweep") -> Any:
    field = knobs()[name]
    return typer.Option(
        help=f"{field.description} Comma list for {what}.", rich_help_panel=panel(name)
    )


class FailOn(StrEnum):
    """What makes `run` exit 1 beyond every cell failing: any failed cell, or any flagged one."""

    none = "none"
    error = "error"
    flagged = "flagged"


@app.command(cls=PanelledCommand)
@with_fields(KNOBS)
def run(
    ctx: typer.Context,
    workload: Annotated[
        str | None,
        typer.Argument(help="Workload name(s), comma separated; see `accelbench list`."),
    ] = None,
    batch_size: Annotated[str, _axis("batch_size")] = "8",
    precision: Annotated[str, _axis("precision")] = "fp32",
    framework: Annotated[str, _axis("framework")] = "torch",
    grad_accum: Annotated[str, _axis("grad_accum")] = "1",
    replicas: Annotated[str, _axis("replicas", "a scaling sweep")] = "1",
    tensor_parallel: Annotated[str, _axis("tensor_parallel")] = "1",
    pipeline_stages: Annotated[str, _axis("pipeline_stages")] = "1",
    workers: Annotated[str, _axis("workers")] = "0",
    prompt_tokens: Annotated[str, _axis("prompt_tokens")] = "128",
    new_tokens: Annotated[str, _axis("new_tokens")] = "32",
    rate_per_s: Annotated[str | None, _axis("rate_per_s")] = None,
    served_model: Annotated[
        str | None,
        typer.Option(
            help="serve: the model the server serves, as it names it: the workload served/NAME.",
            rich_help_panel=panel("endpoint"),
        ),
    ] = None,
    slo: Annotated[
        str | None,
        typer.Option(
            help="serve: the targets of a request, ttft_ms=X,tpot_ms=Y (either or both; "
            "defaults: MLPerf Inference's Llama 2 70B server bounds, 2000 and 200 ms), or an "
            "MLPerf Server preset such as mlperf-llama3.1-8b-interactive (see docs/llm.md).",
            rich_help_panel=panel("endpoint"),
        ),
    ] = None,
    global_batch: Annotated[
        int | None,
        typer.Option(help=SweepFile.model_fields["global_batch"].description or "", min=1),
    ] = None,
    ci: Annotated[
        str | None, typer.Option(help="Target such as 2%: " + spec_help("ci_pct"))
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            help="Run each cell this many times, each in a fresh process, interleaved; the "
            "spread is reported.",
            min=1,
            max=MAX_REPEATS,
        ),
    ] = 1,
    seed: Annotated[int, typer.Option(help=spec_help("seed"))] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            help="Run each cell with this many seeds, from --seed on: convergence varies from "
            "seed to seed, and time-to-train reports the spread.",
            min=1,
            max=MAX_REPEATS,
        ),
    ] = 1,
    model_args: Annotated[
        list[str] | None,
        typer.Option("--model-arg", help="KEY=VALUE, repeatable. " + spec_help("model_args")),
    ] = None,
    sweep: Annotated[
        Path | None,
        typer.Option(help="TOML file of fixed settings and axes; options given here override it."),
    ] = None,
    suite: Annotated[
        str | None,
        typer.Option(
            help="A suite shipped with accelbench (`accelbench suites`): cells at published "
            "figures' configurations, for `compare --reference`; options given here override it."
        ),
    ] = None,
    timeout_s: Annotated[
        float, typer.Option(help="Time limit of each cell, seconds.")
    ] = DEFAULT_TIMEOUT_S,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Measure cells already in the database again, each as its next repeat: "
            "what is stored stays.",
        ),
    ] = False,
    latency_bound_ms: LatencyBoundOption = None,
    fail_on: Annotated[
        FailOn,
        typer.Option(
            help="Exit 1 when any cell failed (error: out of memory, an error, a time-out) or "
            "also when any was flagged (flagged: its verdict is not valid), for CI and "
            "acceptance runs; none: only when every cell failed."
        ),
    ] = FailOn.none,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="List the cells, each as stored already or to run; run nothing."
        ),
    ] = False,
    fmt: AnswerOption = AnswerFormat.table,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Stream each cell's own output (its prints, torch's warnings) to stderr as it "
            "runs; it is kept in the log directory ($ACCELBENCH_LOG_DIR) either way.",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="No progress bar nor line per cell: the table only.")
    ] = False,
    tag: Annotated[
        list[str] | None,
        typer.Option(
            "--tag",
            help="KEY=VALUE, repeatable: a label kept with each result (a job id, a ticket), "
            "exported, never part of its key.",
        ),
    ] = None,
    db: DbOption = None,
    **knobs: Any,
) -> None:
    """Run the grid of the comma lists, each cell in a fresh process, and store every cell."""
    if dry_run and fmt == AnswerFormat.json:  # the options arrive as plain strings
        raise AccelbenchError("--dry-run answers as a table: leave out --format json")
    tags: dict[str, str] = key_values(tag or [], "--tag", typed=False)
    envs: dict[str, environment.Environment] = {}  # a suite's probe serves the plan too
    busy = BusySince()  # sampled while the plan is made, not in a sleep of its own
    with forks.serving():  # imports torch once, while the cells are planned
        cells = plan(cells_of(ctx, envs), timeout_s, envs)  # before the database: no trace if bad
        if dry_run:
            _list(cells, db, force)
            return
        with ResultStore(db) as store:
            free = _fit_to_host(cells, busy)
            if not quiet:
                stderr_console.print(f"{len(cells)} cell(s); results go to {store.where}")
            with _handed(free):
                results = progress.sweep(
                    cells, store, force, timeout_s, verbose=verbose, quiet=quiet, tags=tags
                )
    if fmt == AnswerFormat.json:
        print_answer(answers.RunAnswer(results=_rows(results)))
    else:
        show(results, latency_bound_ms)
    if not any(r.status in MEASURED for r in results):
        typer.echo("error: every cell failed: the reasons are above", err=True)
        raise typer.Exit(1)
    failed = [r for r in results if r.status not in MEASURED]
    flagged = [r for r in results if r.status in MEASURED and validity.verdict_text(r) != "valid"]
    if failed and fail_on != FailOn.none:  # the options arrive as plain strings
        typer.echo(f"error: {len(failed)} of {len(results)} cells failed (--fail-on)", err=True)
        raise typer.Exit(1)
    if flagged and fail_on == FailOn.flagged:
        typer.echo(
            f"error: {len(flagged)} of {len(results)} cells were flagged (--fail-on flagged): "
            "their verdicts are above",
            err=True,
        )
        raise typer.Exit(1)


def _rows(results: list[Result]) -> list[answers.Row]:
    """The results as the table names and judges them."""
    rows, _ = listed(results)
    by_key = {r.key: r for r in results}
    return [answers.row(by_key[r.key], rows.name(r), rows.verdict_text(r)) for r in rows.rows]


def _list(cells: list[Cell], db: str | None, force: bool) -> None:
    """--dry-run: each cell, stored already (and so skipped) or to run. The database is only
    read, and not made where there is none."""
    from accelbench.storage.connect import default_path, is_url

    where = db or default_path()
    done = [False] * len(cells)
    if not force and (is_url(where) or Path(where).exists()):
        with ResultStore(db) as store:
            done = [stored_result(store, spec, env) is not None for spec, env in cells]
    for (spec, _), skipped in zip(cells, done, strict=True):
        console.print(f"{'stored' if skipped else 'to run'}: {describe(spec)}", soft_wrap=True)
    to_run = done.count(False)
    console.print(f"{len(cells)} cell(s), {to_run} to run; nothing was run (--dry-run)")


def cells_of(
    ctx: typer.Context, envs: dict[str, environment.Environment] | None = None
) -> list[RunSpec]:
    """The cells a `run` command line asks for, from its options and sweep file or suite,
    validated. A suite's parts are chosen for the platform, probed once into `envs`."""
    p = {k: v.value if isinstance(v, Enum) else v for k, v in ctx.params.items()}
    if p["served_model"] is not None:
        if p["workload"]:
            raise AccelbenchError("give a workload or --served-model, not both")
        p["workload"] = f"served/{p['served_model']}"
    no_cells = p["workload"] is None and p["sweep"] is None and p["suite"] is None
    if no_cells and p["scenario"] in scenarios.names():  # a device scenario's own kernels
        p["workload"] = ",".join(scenarios.get(p["scenario"]).workloads) or None
    axes: dict[str, list[Any]] = {
        "repeat": list(range(p["repeats"])),  # first: repeats interleave, drift spreads over all
        "seed": list(range(p["seed"], p["seed"] + p["seeds"])),
        "workload": split(p["workload"]) if p["workload"] else [],
        **{name: split(p[name]) for name in AXES if p[name] is not None},
    }
    bounded = {s.name for s in owners("latency_bound_ms")}
    fixed = (
        {name: p[name] for name in KNOBS}
        | _slo(p["slo"])
        | {
            "model_args": key_values(p["model_args"] or []),
            "ci_pct": percent(p["ci"]),
            # The bound is a setting of the server scenario; elsewhere it only picks a headline.
            "latency_bound_ms": p["latency_bound_ms"] if p["scenario"] in bounded else None,
        }
    )
    global_batch = p["global_batch"]
    if global_batch is not None:
        if _from_command_line(ctx, "grad_accum"):
            raise AccelbenchError("give --global-batch or --grad-accum, not both")
        del axes["grad_accum"]  # set per cell to hold the global batch
    if p["sweep"] is None and p["suite"] is None:
        if not p["workload"]:
            raise AccelbenchError(
                "name a workload (see `accelbench list`), or give --sweep FILE or --suite NAME"
            )
        return SweepFile(axes=axes, fixed=fixed, global_batch=global_batch).specs()
    given = {n for n in axes | fixed if _from_command_line(ctx, OPTION_NAMES.get(n, n))}
    given |= {"seed"} if _from_command_line(ctx, "seeds") else set()
    bases: list[SweepFile]
    if p["suite"] is None:
        bases = [load_sweep(p["sweep"])]
    elif p["sweep"] is not None:
        raise AccelbenchError("give --sweep FILE or --suite NAME, not both")
    else:
        from accelbench import suites

        found = suites.load(p["suite"])
        envs = {} if envs is None else envs
        device = fixed["device"]
        if device not in envs:
            envs[device] = launch.probe_environment(device)
        bases = list(suites.parts_for(found, envs[device]))
    if global_batch is not None:
        bases = [b.model_copy(update={"global_batch": global_batch}) for b in bases]
    return [spec for base in bases for spec in _override(base, axes, fixed, given).specs()]


def _slo(text: str | None) -> dict[str, Any]:
    """The spec fields of --slo, read by the settings of the scenario that holds the SLO."""
    if not text:
        return {}
    (owner,) = owners("slo_ttft_ms")
    return owner.settings.option_fields("slo", text)


def _fit_to_host(cells: list[Cell], busy: BusySince) -> int:
    """The CPUs other work leaves free, for the cells' --threads auto (contention.auto_threads),
    saying what they will run with; and a warning before the first cell when other work still
    keeps the CPUs a cell needs busy, naming the --threads that fits."""
    others, cpus, load = busy.others()
    free = contention.free_cpus(others, cpus)
    chosen = [contention.auto_threads(s, e.device_type, free, cpus) for s, e in cells]
    pairs = zip(cells, chosen, strict=True)
    if auto := sorted({n for (s, _), n in pairs if n is not None and n != s.threads}):
        stderr_console.print(
            f"threads: other processes keep {others:.1f} of {cpus} CPUs busy: CPU cells run with "
            f"--threads {', '.join(map(str, auto))} (the record's torch_num_threads)",
            soft_wrap=True,
        )
    fitted = [
        (s.model_copy(update={"threads": n}), e) for (s, e), n in zip(cells, chosen, strict=True)
    ]
    _warn_if_busy(fitted, others, cpus, load)
    return free


@contextmanager
def _handed(free: int) -> Iterator[None]:
    """The sweep's cells told the free CPUs through their environment: the host's state as the
    sweep began, not part of any cell's spec or key."""
    before = os.environ.get(contention.FREE_CPUS_ENV)
    os.environ[contention.FREE_CPUS_ENV] = str(free)
    try:
        yield
    finally:
        if before is None:
            del os.environ[contention.FREE_CPUS_ENV]
        else:
            os.environ[contention.FREE_CPUS_ENV] = before


def _warn_if_busy(cells: list[Cell], others: float, cpus: int, load: float) -> None:
    needed = max(contention.cpus_needed(spec, env.device_type, cpus) for spec, env in cells)
    warning = contention.busy_warning(others, cpus, load, needed)
    if warning:
        stderr_console.print(f"warning: {warning}", style="yellow")


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)  # an option's environment variable says it too
    return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")


def _override(
    base: SweepFile, axes: dict[str, list[Any]], fixed: dict[str, Any], given: set[str]
) -> SweepFile:
    """The sweep file (or suite part) with the settings given on the command line in place of
    its own."""
    keep_axes = {k: v for k, v in base.axes.items() if k not in given}
    keep_fixed = {k: v for k, v in base.fixed.items() if k not in given}
    return SweepFile(
        axes=keep_axes | {k: v for k, v in axes.items() if k in given},
        fixed=keep_fixed | {k: v for k, v in fixed.items() if k in given},
        global_batch=base.global_batch,
    )
