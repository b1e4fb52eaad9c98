"""The command line: list, env, run, results, report, compare, export, import, references, slurm.
Only this module and report.py touch the terminal."""

from __future__ import annotations

import json
import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import Progress
from typer.core import TyperGroup

from accelbench import comparison, contention, environment, launch, references, report, workloads
from accelbench.errors import AccelbenchError
from accelbench.result import Result
from accelbench.spec import DeviceType, RunSpec
from accelbench.store import ResultStore
from accelbench.sweep import DEFAULT_TIMEOUT_S, SweepFile, load_sweep, run_sweep

# Wide enough for the results table when the output goes to a file or a pipe.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


class _Group(TyperGroup):
    """Turns the tool's own errors into one line on stderr and exit code 2; anything else is a
    bug and keeps its traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (AccelbenchError, ValidationError) as exc:
            message = _validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
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


def _help(field: str) -> str:
    return RunSpec.model_fields[field].description or ""


def _job_help(field: str) -> str:
    from accelbench.slurm import JobSpec

    return JobSpec.model_fields[field].description or field.replace("_", " ").capitalize() + "."


_OPTION = {"repeat": "repeats", "ci_pct": "ci"}
"""Spec fields whose command-line parameter has another name."""


def _validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    if not error["loc"]:  # a rule over several settings, which names them itself
        return error["msg"].removeprefix("Value error, ")
    field = "-".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        return f"unknown setting {field!r}: `accelbench run --help` lists them"
    option = "--" + _OPTION.get(field, field).replace("_", "-")
    if not option.isprintable():
        option = repr(option)
    if error["type"] == "missing":
        return f"{option} is required: give it on the command line or in the sweep file"
    return f"invalid value {error.get('input')!r} for {option}: {error['msg']}"


def _split(text: str) -> list[str]:
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


def _load(
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


def _emit(text: str, out: Path | None, wrote: str) -> None:
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


@app.command("list")
def list_workloads() -> None:
    """The workloads, one line each."""
    width = max(map(len, workloads.WORKLOADS))
    for name in workloads.WORKLOADS:
        console.print(f"{name:<{width}}  {workloads.describe(name)}", soft_wrap=True)
    console.print("\nAlso: timm/<model>, hf/<model_type>, path/to/file.py:function (see README)")


@app.command()
def env(
    device: Annotated[str, typer.Option(help=_help("device"))] = "auto",
    fmt: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
) -> None:
    """The detected platform: devices, host CPU, NUMA nodes, versions."""
    if device not in get_args(DeviceType):
        raise AccelbenchError(
            f"unknown device {device!r}; use one of: {', '.join(get_args(DeviceType))}"
        )
    captured = environment.capture(device)
    if fmt is Format.table:
        for field, value in captured.model_dump().items():
            console.print(f"{field:<18} {value}")
    else:
        console.print_json(captured.model_dump_json())


@app.command()
def run(
    ctx: typer.Context,
    workload: Annotated[
        str | None,
        typer.Argument(help="Workload name(s), comma separated; see `accelbench list`."),
    ] = None,
    batch_size: Annotated[
        str, typer.Option(help=_help("batch_size") + " Comma list for a sweep.")
    ] = "8",
    precision: Annotated[
        str, typer.Option(help=_help("precision") + " Comma list for a sweep.")
    ] = "fp32",
    grad_accum: Annotated[
        str, typer.Option(help=_help("grad_accum") + " Comma list for a sweep.")
    ] = "1",
    replicas: Annotated[
        str, typer.Option(help=_help("replicas") + " Comma list for a scaling sweep.")
    ] = "1",
    global_batch: Annotated[
        int | None,
        typer.Option(help=SweepFile.model_fields["global_batch"].description or "", min=1),
    ] = None,
    pipeline_stages: Annotated[
        str, typer.Option(help=_help("pipeline_stages") + " Comma list for a sweep.")
    ] = "1",
    pipeline_schedule: Annotated[str, typer.Option(help=_help("pipeline_schedule"))] = "gpipe",
    nodes: Annotated[int, typer.Option(help=_help("nodes"), min=1)] = 1,
    bn_span: Annotated[int, typer.Option(help=_help("bn_span"), min=1)] = 1,
    numa_binding: Annotated[str | None, typer.Option(help=_help("numa_binding"))] = None,
    scenario: Annotated[str, typer.Option(help=_help("scenario"))] = "train",
    rate_per_s: Annotated[float | None, typer.Option(help=_help("rate_per_s"))] = None,
    batch_timeout_ms: Annotated[float, typer.Option(help=_help("batch_timeout_ms"))] = 2.0,
    num_queries: Annotated[int, typer.Option(help=_help("num_queries"))] = 500,
    target: Annotated[str | None, typer.Option(help=_help("target"))] = None,
    max_steps: Annotated[int | None, typer.Option(help=_help("max_steps"))] = None,
    lr_scaling: Annotated[str, typer.Option(help=_help("lr_scaling"))] = "fixed",
    lr_base_batch: Annotated[int, typer.Option(help=_help("lr_base_batch"))] = 256,
    warmup_steps: Annotated[int, typer.Option(help=_help("warmup_steps"))] = 0,
    diverge_factor: Annotated[float, typer.Option(help=_help("diverge_factor"))] = 10.0,
    inputs_on_device: Annotated[
        bool, typer.Option("--inputs-on-device", help=_help("inputs_on_device"))
    ] = False,
    epochs: Annotated[int, typer.Option(help=_help("epochs"))] = 2,
    steps_per_epoch: Annotated[int, typer.Option(help=_help("steps_per_epoch"))] = 20,
    compile: Annotated[bool, typer.Option("--compile", help=_help("compile"))] = False,
    channels_last: Annotated[
        bool, typer.Option("--channels-last", help=_help("channels_last"))
    ] = False,
    recompute: Annotated[bool, typer.Option("--recompute", help=_help("recompute"))] = False,
    optimizer: Annotated[str, typer.Option(help=_help("optimizer"))] = "sgd",
    lr: Annotated[float, typer.Option(help=_help("lr"))] = 0.01,
    workers: Annotated[str, typer.Option(help=_help("workers") + " Comma list for a sweep.")] = "0",
    threads: Annotated[int | None, typer.Option(help=_help("threads"), min=1)] = None,
    window_steps: Annotated[int, typer.Option(help=_help("window_steps"))] = 2,
    ci: Annotated[str | None, typer.Option(help="Target such as 2%: " + _help("ci_pct"))] = None,
    max_measure_s: Annotated[float, typer.Option(help=_help("max_measure_s"))] = 600.0,
    repeats: Annotated[
        int,
        typer.Option(
            help="Run each cell this many times, each in a fresh process, interleaved; the spread is reported.",
            min=1,
        ),
    ] = 1,
    device: Annotated[str, typer.Option(help=_help("device"))] = "auto",
    seed: Annotated[int, typer.Option(help=_help("seed"))] = 0,
    seeds: Annotated[
        int,
        typer.Option(
            help="Run each cell with this many seeds, from --seed on: convergence varies from "
            "seed to seed, and time-to-train reports the spread.",
            min=1,
        ),
    ] = 1,
    model_args: Annotated[
        list[str] | None,
        typer.Option("--model-arg", help="KEY=VALUE, repeatable. " + _help("model_args")),
    ] = None,
    data: Annotated[str | None, typer.Option(help=_help("data"))] = None,
    sweep: Annotated[
        Path | None,
        typer.Option(help="TOML file of fixed settings and axes; options given here override it."),
    ] = None,
    timeout_s: Annotated[
        float, typer.Option(help="Time limit of each cell, seconds.")
    ] = DEFAULT_TIMEOUT_S,
    force: Annotated[
        bool, typer.Option("--force", help="Re-run cells already in the database.")
    ] = False,
    latency_bound_ms: LatencyBoundOption = None,
    db: DbOption = None,
) -> None:
    """Run the grid of the comma lists, each cell in a fresh process, and store every cell."""
    axes: dict[str, list[Any]] = {
        "repeat": list(range(repeats)),  # first: repeats interleave, so drift spreads over all
        "seed": list(range(seed, seed + seeds)),
        "workload": _split(workload) if workload else [],
        "batch_size": _split(batch_size),
        "precision": _split(precision),
        "grad_accum": _split(grad_accum),
        "replicas": _split(replicas),
        "pipeline_stages": _split(pipeline_stages),
        "workers": _split(workers),
    }
    fixed = {
        "epochs": epochs, "steps_per_epoch": steps_per_epoch, "compile": compile,
        "channels_last": channels_last, "recompute": recompute, "optimizer": optimizer, "lr": lr,
        "window_steps": window_steps, "device": device,
        "model_args": _key_values(model_args or []), "data": data, "ci_pct": _percent(ci),
        "max_measure_s": max_measure_s, "nodes": nodes, "bn_span": bn_span,
        "numa_binding": numa_binding, "pipeline_schedule": pipeline_schedule,
        "scenario": scenario, "inputs_on_device": inputs_on_device, "rate_per_s": rate_per_s,
        "batch_timeout_ms": batch_timeout_ms, "num_queries": num_queries, "target": target,
        "max_steps": max_steps, "lr_scaling": lr_scaling, "lr_base_batch": lr_base_batch,
        "warmup_steps": warmup_steps, "diverge_factor": diverge_factor, "threads": threads,
        # The bound is a setting of the server scenario; elsewhere it only picks a headline.
        "latency_bound_ms": latency_bound_ms if scenario == "server" else None,
    }  # fmt: skip
    if global_batch is not None:
        if _from_command_line(ctx, "grad_accum"):
            raise AccelbenchError("give --global-batch or --grad-accum, not both")
        del axes["grad_accum"]  # set per cell to hold the global batch
    if sweep is None:
        if not workload:
            raise AccelbenchError("name a workload (see `accelbench list`) or give --sweep FILE")
        specs = SweepFile(axes=axes, fixed=fixed, global_batch=global_batch).specs()
    else:
        given = {n for n in axes | fixed if _from_command_line(ctx, _OPTION.get(n, n))}
        given |= {"seed"} if _from_command_line(ctx, "seeds") else set()
        base = load_sweep(sweep)
        if global_batch is not None:
            base = base.model_copy(update={"global_batch": global_batch})
        specs = _override(base, axes, fixed, given).specs()
    _warn_if_busy()
    with ResultStore(db) as store, Progress(console=console, transient=True) as progress:
        console.print(f"{len(specs)} cell(s); results go to {store.where}")
        task = progress.add_task("starting", total=len(specs))

        def started(spec: RunSpec) -> None:
            replicas = f" x{spec.num_processes}" if spec.num_processes > 1 else ""
            progress.update(
                task, description=f"{spec.workload} bs={spec.batch_size}{replicas} {spec.precision}"
            )

        def finished(result: Result, skipped: bool) -> None:
            progress.console.print(report.cell_line(result, skipped))
            progress.advance(task)

        results = run_sweep(
            specs, store, force=force, timeout_s=timeout_s, on_start=started, on_result=finished
        )
    _show(results, latency_bound_ms)


def _warn_if_busy() -> None:
    """Say before the first cell when other work keeps the host busy: its cells would be
    flagged contended."""
    others, cpus, load = contention.busy_now(0.5)
    if others > contention.SLACK_CPUS:
        console.print(
            f"[yellow]warning:[/] other processes keep {others:.1f} of {cpus} CPUs busy (1-min "
            f"load {load:.1f}): results taken now will be flagged contended; run where nothing "
            "else does",
            highlight=False,
        )


def _percent(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.strip().removesuffix("%"))
    except ValueError:
        raise AccelbenchError(f"--ci {text!r}: give a percentage such as 2%") from None


def _key_values(pairs: list[str]) -> dict[str, Any]:
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


def _from_command_line(ctx: typer.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def _override(
    base: SweepFile, axes: dict[str, list[Any]], fixed: dict[str, Any], given: set[str]
) -> SweepFile:
    """The sweep file with the settings given on the command line in place of its own."""
    keep_axes = {k: v for k, v in base.axes.items() if k not in given}
    keep_fixed = {k: v for k, v in base.fixed.items() if k not in given}
    return SweepFile(
        axes=keep_axes | {k: v for k, v in axes.items() if k in given},
        fixed=keep_fixed | {k: v for k, v in fixed.items() if k in given},
        global_batch=base.global_batch,
    )


def _show(results: list[Result], latency_bound_ms: float | None = None) -> None:
    console.print(report.table(results))
    time_to_train = report.time_to_train_table(results)
    if time_to_train is not None:
        console.print(time_to_train)
    for line in report.notes(results, latency_bound_ms):
        console.print(line)


@app.command()
def results(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    status: StatusFilter = None,
    limit: Annotated[int | None, typer.Option(help="Only the newest N.", min=1)] = None,
    fmt: Annotated[
        Format, typer.Option("--format", help="table, json (full records) or csv.")
    ] = Format.table,
    latency_bound_ms: LatencyBoundOption = None,
    project_epochs: Annotated[
        float | None,
        typer.Option(
            help="Also project each training run's time to train this many epochs from its "
            "throughput (with --epoch-items), marked as projected.",
            min=0,
        ),
    ] = None,
    epoch_items: Annotated[
        int | None, typer.Option(help="Items in one epoch of the data set, for --project-epochs.")
    ] = None,
    db: DbOption = None,
) -> None:
    """The stored runs, oldest first."""
    if workload is not None:
        workloads.check_name(workload)
    if (project_epochs is None) != (epoch_items is None) or (epoch_items or 1) < 1:
        raise AccelbenchError(
            "give --project-epochs with --epoch-items (a positive count), e.g. "
            "--project-epochs 90 --epoch-items 1281167 for ImageNet-1k"
        )
    with ResultStore(db, writable=False) as store:
        found = store.query(workload=workload, platform=platform, status=status, limit=limit)
    if fmt is Format.json:
        print(report.to_json(found), end="")
    elif fmt is Format.csv:
        print(report.to_csv(found), end="")
    elif found:
        _show(found, latency_bound_ms)
        if project_epochs is not None and epoch_items is not None:
            for line in report.projection_lines(found, project_epochs, epoch_items):
                console.print(line)
    else:
        console.print("no stored results match")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def slurm(
    ctx: typer.Context,
    nodes: Annotated[int, typer.Option(help=_job_help("nodes"), min=1)],
    gpus_per_node: Annotated[int, typer.Option(help=_job_help("gpus_per_node"), min=0)] = 0,
    cpus_per_node: Annotated[
        int | None, typer.Option(help=_job_help("cpus_per_node"), min=1)
    ] = None,
    time: Annotated[str, typer.Option(help=_job_help("time"))] = "01:00:00",
    partition: Annotated[str | None, typer.Option(help=_job_help("partition"))] = None,
    account: Annotated[str | None, typer.Option(help=_job_help("account"))] = None,
    out: Annotated[Path, typer.Option(help="Where to write the job script.")] = Path(
        "accelbench.sbatch"
    ),
    submit: Annotated[bool, typer.Option("--submit", help="Submit it with sbatch.")] = False,
    db: DbOption = None,
) -> None:
    """Write a Slurm job script for the sweep after `--`, e.g.
    `accelbench slurm --nodes 2 --gpus-per-node 4 -- run resnet50 --replicas 4,8 --nodes 2`."""
    from accelbench import slurm as slurm_job
    from accelbench.store import default_path

    run_args = list(ctx.args)
    if not run_args or run_args[0] != "run":
        raise AccelbenchError(
            "give the sweep after --, e.g. accelbench slurm --nodes 2 -- run resnet50 "
            "--replicas 8 --nodes 2"
        )
    if "--db" in run_args:
        raise AccelbenchError("give --db to `accelbench slurm`, before the --")
    try:  # the sweep's options, checked now rather than when the job starts
        parsed = typer.main.get_command(app).commands["run"].make_context("run", run_args[1:])  # type: ignore[attr-defined]
    except typer.TyperException as exc:  # typer's own click: a usage error
        raise AccelbenchError(f"the sweep after --: {exc.format_message()}") from None
    if parsed.params["nodes"] > nodes:
        raise AccelbenchError(
            f"the sweep asks for {parsed.params['nodes']} nodes and the job for {nodes}: "
            "raise --nodes of the job"
        )
    job = slurm_job.JobSpec(
        nodes=nodes, gpus_per_node=gpus_per_node, cpus_per_node=cpus_per_node, time=time,
        partition=partition, account=account,
    )  # fmt: skip
    out.write_text(slurm_job.script(job, run_args, db or default_path()))
    out.chmod(0o755)
    console.print(f"wrote {out}")
    if submit:
        console.print(slurm_job.submit(out))


@app.command("references")
def list_references(
    workload: Annotated[str | None, typer.Option(help="Only this workload.")] = None,
    platform: Annotated[
        str | None, typer.Option(help="Only platforms whose name contains this.")
    ] = None,
    table: Annotated[
        str | None, typer.Option(help="Only tables whose name contains this, e.g. 'Table 4'.")
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="table, json or csv.")] = Format.table,
) -> None:
    """Published results shipped with accelbench, with their sources; platforms set side by
    side at equal device counts under the table."""
    if workload is not None:
        workloads.check_name(workload)
    found = references.query(workload=workload, platform=platform, table=table)
    if fmt is Format.table:
        console.print(report.references_table(found))
        for line in report.head_to_head(found):
            console.print(line)
    elif fmt is Format.json:
        print(json.dumps([r.model_dump() for r in found], indent=2))
    else:
        print(report.rows_csv([r.model_dump() for r in found]), end="")


@app.command()
def compare(
    by: Annotated[
        str | None,
        typer.Option(
            help="Set each value of this against the baseline's at matched conditions: platform, "
            "precision, batch_size, compile, replicas or any other setting."
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            help="The value of --by the others are set against (default: each cell's smallest)."
        ),
    ] = None,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference", help="Set each stored run beside its closest published figure."
        ),
    ] = False,
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    tolerance: Annotated[
        float, typer.Option(help="Band around the published figure, percent.", min=0)
    ] = references.DEFAULT_TOLERANCE_PCT,
    db: DbsOption = None,
) -> None:
    """Throughput ratios between configurations (--by), with intervals; or stored runs against
    published results (--reference)."""
    if (by is None) == (not reference):
        raise AccelbenchError(
            "give --by FIELD (e.g. --by platform) to compare configurations, or --reference to "
            "compare with published results"
        )
    found, _ = _load(db, workload, platform, status="ok")
    if by is not None:
        found_ratios = comparison.ratios(found, by, baseline)
        if not found_ratios:
            console.print(f"no cell was run at two values of {by}: nothing to compare")
            return
        console.print(report.ratio_table(found_ratios, by))
        for line in comparison.summary(found_ratios):
            console.print(line)
        return
    matches = [m for m in map(references.match, found) if m is not None]
    if matches:
        console.print(report.reference_table(matches, tolerance))
        for line in report.reference_notes(matches, tolerance):
            console.print(line)
    unmatched = sorted(
        {(r.spec.workload, r.env.platform) for r in found}
        - {(m.result.spec.workload, m.result.env.platform) for m in matches}
    )
    for name, where in unmatched:
        console.print(f"{name} on {where}: no published throughput for this device family")
    if not found:
        console.print("no stored results match")


class ReportFormat(StrEnum):
    html = "html"
    md = "md"
    csv = "csv"
    json = "json"


@app.command("report")
def make_report(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    status: StatusFilter = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write it here (default for html: report.html; else standard output)."),
    ] = None,
    fmt: Annotated[
        ReportFormat,
        typer.Option(
            "--format", help="html (one self-contained page with figures), md, csv, json."
        ),
    ] = ReportFormat.html,
    figures_dir: Annotated[
        Path | None, typer.Option("--figures", help="Also write every figure here as PNG and SVG.")
    ] = None,
    db: DbsOption = None,
) -> None:
    """The stored runs as a report: figures (throughput against batch size, scaling, first
    against steady epoch, latency, time to train, energy and MFU) and the seed paper's tables."""
    from accelbench import document, figures

    found, sources = _load(db, workload, platform, status)
    if not found:
        raise AccelbenchError("no stored results match: run a sweep first, or loosen the filters")
    plots = figures.plots(found) if fmt is ReportFormat.html or figures_dir else []
    if fmt is ReportFormat.html:
        text, out = document.page(found, plots, sources), out or Path("report.html")
    elif fmt is ReportFormat.md:
        text = document.markdown(found)
    else:
        text = report.to_json(found) if fmt is ReportFormat.json else report.to_csv(found)
    _emit(text, out, f"wrote {out}: {len(found)} results, {len(plots)} figures")
    if figures_dir is not None:
        figures_dir.mkdir(parents=True, exist_ok=True)
        for plot in plots:
            for suffix in ("svg", "png"):
                (figures_dir / f"{plot.name}.{suffix}").write_bytes(plot.render(suffix))
        console.print(f"wrote {2 * len(plots)} figure files (PNG and SVG) to {figures_dir}")


@app.command()
def export(
    workload: WorkloadFilter = None,
    platform: PlatformFilter = None,
    status: StatusFilter = None,
    out: Annotated[Path | None, typer.Option(help="Write here, not to standard output.")] = None,
    db: DbsOption = None,
) -> None:
    """Stored results as JSON, for `accelbench import` on another machine."""
    from accelbench import exchange

    found, _ = _load(db, workload, platform, status)
    _emit(exchange.dumps(found), out, f"wrote {len(found)} results to {out}")


@app.command("import")
def import_results(
    files: Annotated[
        list[Path],
        typer.Argument(help="Files made by `accelbench export`, or accelbench SQLite databases."),
    ],
    db: DbOption = None,
) -> None:
    """Merge results from other machines into the database. Every file is checked whole first:
    a malformed one changes nothing. Results stored already (same key) are kept as they are."""
    from accelbench import exchange

    found = [r for path in files for r in exchange.load(path)]
    with ResultStore(db) as store:
        new = store.add(found)
        where = store.where
    console.print(
        f"imported {new} new results into {where}; {len(found) - new} were stored already "
        "(same cell, same platform)"
    )


@app.command()
def recommend(
    workload: Annotated[str, typer.Argument(help="The workload to advise on.")],
    objective: Annotated[
        str,
        typer.Option(
            help="throughput, time-to-train, latency (with --latency-bound-ms), energy "
            "(J per item) or cost (with --prices)."
        ),
    ] = "throughput",
    scenario: Annotated[
        str | None,
        typer.Option(help="train or infer, for throughput, energy and cost (default: train)."),
    ] = None,
    latency_bound_ms: Annotated[
        float | None, typer.Option(help="Latency: the p99 each batch must keep within, ms.", min=0)
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            help='Cost: a TOML file, [prices] then "A100" = 2.5 ($ per device-hour, by '
            "a part of the platform name)."
        ),
    ] = None,
    global_batch: Annotated[
        int | None, typer.Option(help="Only configurations with this global batch.", min=1)
    ] = None,
    max_devices: Annotated[
        int | None, typer.Option(help="At most this many devices.", min=1)
    ] = None,
    memory_headroom: Annotated[
        str | None, typer.Option(help="Keep this share of device memory free, e.g. 10%.")
    ] = None,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference", help="Also list what published results give on other platforms."
        ),
    ] = False,
    db: DbsOption = None,
) -> None:
    """Which platform, batch size, device count and precision for an objective, from the stored
    runs: per platform the best configuration, its effective batch range, the runs behind it,
    how sure that is and what was not measured."""
    from accelbench import advice

    if scenario is not None and objective in ("time-to-train", "latency"):
        raise AccelbenchError(
            f"--scenario goes with throughput, energy or cost; {objective} sets its own"
        )
    if scenario not in (None, "train", "infer"):
        raise AccelbenchError(f"--scenario {scenario!r}: give train or infer")
    constraints = advice.Constraints(
        global_batch=global_batch, max_devices=max_devices,
        memory_headroom_pct=_percent(memory_headroom), latency_bound_ms=latency_bound_ms,
        prices=advice.load_prices(prices) if prices else {},
    )  # fmt: skip
    found, _ = _load(db, workload, None)
    answers = advice.recommend(found, workload, objective, constraints, scenario)
    goal = advice.GOALS[objective]
    console.print(
        f"{workload}, objective {objective} ({goal.unit}), "
        f"{scenario or goal.scenario} results"
        + (f"; constraints: {constraints.text()}" if constraints.text() else "")
    )
    if not answers:
        console.print(
            f"no stored {scenario or goal.scenario} results of {workload}: measure some with "
            f"`accelbench tune {workload}` or `accelbench run`"
        )
    for line in report.advice_lines(answers, objective):
        console.print(line)
    if reference:
        for line in advice.published(workload, [a.platform for a in answers]) or [
            "no published throughput for this workload"
        ]:
            console.print(line)


@app.command()
def tune(
    workload: Annotated[str, typer.Argument(help="The workload to tune.")],
    budget_s: Annotated[
        float, typer.Option(help="Stop starting trials after this long, s.", min=1)
    ] = 600.0,
    min_batch: Annotated[int, typer.Option(help="First micro batch of the doubling.", min=1)] = 1,
    max_batch: Annotated[int, typer.Option(help="Largest micro batch to try.", min=1)] = 4096,
    resolution: Annotated[
        float, typer.Option(help="Bisect the memory boundary to this share of the batch.", min=0.01)
    ] = 0.25,
    replicas: Annotated[
        str, typer.Option(help="Then the fastest batch at these replica counts, comma list.")
    ] = "1",
    scenario: Annotated[str, typer.Option(help="train or infer.")] = "train",
    precision: Annotated[str, typer.Option(help=_help("precision"))] = "fp32",
    compile: Annotated[bool, typer.Option("--compile", help=_help("compile"))] = False,
    epochs: Annotated[int, typer.Option(help=_help("epochs"))] = 2,
    steps_per_epoch: Annotated[int, typer.Option(help=_help("steps_per_epoch"))] = 20,
    window_steps: Annotated[int, typer.Option(help=_help("window_steps"))] = 2,
    workers: Annotated[int, typer.Option(help=_help("workers"))] = 0,
    device: Annotated[str, typer.Option(help=_help("device"))] = "auto",
    model_args: Annotated[
        list[str] | None,
        typer.Option("--model-arg", help="KEY=VALUE, repeatable. " + _help("model_args")),
    ] = None,
    data: Annotated[str | None, typer.Option(help=_help("data"))] = None,
    timeout_s: Annotated[float, typer.Option(help="Time limit of each trial, seconds.")] = 900.0,
    db: DbOption = None,
) -> None:
    """Find the largest micro batch that fits and the fastest one, then the device-count curve,
    within a time budget; every trial runs in a fresh process and is stored like any run."""
    from accelbench import tuning

    if min_batch > max_batch:
        raise AccelbenchError(f"--min-batch {min_batch} is above --max-batch {max_batch}")
    base = RunSpec.model_validate({
        "workload": workload, "scenario": scenario, "batch_size": min_batch,
        "precision": precision, "compile": compile, "epochs": epochs,
        "steps_per_epoch": steps_per_epoch, "window_steps": window_steps, "workers": workers,
        "device": device, "model_args": _key_values(model_args or []), "data": data,
    })  # fmt: skip
    counts = sorted({int(n) for n in _split(replicas)})
    if scenario != "train" and counts != [1]:
        raise AccelbenchError("the device-count curve is for training: leave out --replicas")
    with ResultStore(db) as store:
        console.print(f"tuning {workload} within {budget_s:g} s; trials go to {store.where}")
        envs: dict[str, environment.Environment] = {}  # probed once for all the trials

        def measure(batch: int, num_replicas: int) -> Result:
            spec = RunSpec.model_validate(
                base.model_dump() | {"batch_size": batch, "replicas": num_replicas}
            )
            (result,) = run_sweep(
                [spec], store, timeout_s=timeout_s, envs=envs,
                on_result=lambda r, skipped: console.print(report.cell_line(r, skipped)),
            )  # fmt: skip
            return result

        found = tuning.search(
            measure, start=min_batch, max_batch=max_batch, budget=tuning.Budget(budget_s),
            resolution=resolution, replicas=counts,
        )  # fmt: skip
    for line in report.tune_lines(found, max_batch):
        console.print(line)
    console.print(
        f"next: `accelbench recommend {workload}` answers from these and every stored run"
    )


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
