"""The command that searches for what to run: tune (the largest and fastest micro batch, the
device-count curve, the fewest devices a sharded model trains on)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from accelbench.cli.app import (
    AnswerFormat,
    AnswerOption,
    DbOption,
    app,
    console,
    counts,
    key_values,
    print_answer,
    stderr_console,
)
from accelbench.cli.options import spec_help, with_fields
from accelbench.errors import AccelbenchError
from accelbench.orchestration import forks, searches
from accelbench.orchestration.sweep import check_timeout
from accelbench.records.result import Result
from accelbench.records.spec import MAX_REPEATS, RunSpec
from accelbench.report import advice as advice_text
from accelbench.report import answers
from accelbench.report.advice import fewest_lines, tune_lines
from accelbench.report.database import ResultStore
from accelbench.report.results import cell_line

TUNE_KNOBS = (
    "platform",
    "precision",
    "threads",
    "compile",
    "epochs",
    "steps_per_epoch",
    "window_steps",
    "min_steady_s",
    "workers",
    "device",
    "data",
    "optimizer",
    "recompute",
    "fsdp",
    "fsdp_offload",
    "tensor_parallel",
)
"""Spec fields a tuning search holds fixed over its trials."""


@app.command()
@with_fields(TUNE_KNOBS)
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
        str,
        typer.Option(
            help="Then the fastest batch at these replica counts (with --fsdp, where what fits "
            "depends on the count: the whole search at each), comma list."
        ),
    ] = "1",
    scenario: Annotated[str, typer.Option(help="train or infer.")] = "train",
    model_args: Annotated[
        list[str] | None,
        typer.Option("--model-arg", help="KEY=VALUE, repeatable. " + spec_help("model_args")),
    ] = None,
    timeout_s: Annotated[float, typer.Option(help="Time limit of each trial, seconds.")] = 900.0,
    fewest_devices: Annotated[
        bool,
        typer.Option(
            "--fewest-devices",
            help="Instead: the fewest devices on which the model trains at micro batch "
            "--min-batch, sharded with --fsdp (and --tensor-parallel), up to --max-devices.",
        ),
    ] = False,
    max_devices: Annotated[
        int | None,
        typer.Option(help="--fewest-devices: try at most this many (default: this node's).", min=1),
    ] = None,
    repeats: Annotated[
        int,
        typer.Option(
            help="Run each trial this many times, each in a fresh process, and judge it by "
            "their median: one run's rate can be off by a third on a shared node.",
            min=1,
            max=MAX_REPEATS,
        ),
    ] = 1,
    fmt: AnswerOption = AnswerFormat.table,
    db: DbOption = None,
    **knobs: Any,
) -> None:
    """Find the largest micro batch that fits and the fastest one, then the device-count curve,
    within a time budget; or the fewest devices a sharded model trains on. Every trial runs in a
    fresh process and is stored like any run."""
    check_timeout(timeout_s)
    if min_batch > max_batch:
        raise AccelbenchError(f"--min-batch {min_batch} is above --max-batch {max_batch}")
    base = RunSpec.model_validate(
        knobs
        | {
            "workload": workload,
            "scenario": scenario,
            "batch_size": min_batch,
            "model_args": key_values(model_args or []),
        }
    )

    as_json = fmt == AnswerFormat.json  # the options arrive as plain strings
    say = stderr_console if as_json else console  # standard output holds the JSON alone

    def printed(r: Result, skipped: bool) -> None:
        say.print(cell_line(r, skipped))

    with forks.serving():  # one cell server for every trial
        if fewest_devices:
            env, most, start, why = searches.fewest_devices_start(base, max_devices)
            say.print(why)
            with ResultStore(db) as store:
                trial = searches.trials(
                    base,
                    store,
                    timeout_s=timeout_s,
                    repeats=repeats,
                    envs={base.device: env},
                    on_result=printed,
                )
                fewest = searches.fewest_devices(trial, start=start, most=most, budget_s=budget_s)
            if as_json:
                tried = [
                    advice_text.Trial(at=n, result=answers.plain_row(r))
                    for n, r in sorted(fewest.trials.items())
                ]
                print_answer(
                    advice_text.TuneAnswer(
                        workload=workload,
                        searches=[],
                        fewest_devices=None
                        if fewest.fewest is None
                        else fewest.fewest * base.tensor_parallel,
                        device_trials=tried,
                    )
                )
                return
            for line in fewest_lines(fewest, base, most):
                console.print(line)
            return
        replica_counts = counts(replicas, "--replicas")
        found_all = []
        with ResultStore(db) as store:
            say.print(f"tuning {workload} within {budget_s:g} s; trials go to {store.where}")
            trial = searches.trials(
                base, store, timeout_s=timeout_s, repeats=repeats, on_result=printed
            )
            for held, found in searches.batches(
                base,
                trial,
                budget_s=budget_s,
                max_batch=max_batch,
                resolution=resolution,
                replica_counts=replica_counts,
            ):
                found_all.append(advice_text.batch_search(found, held))
                if not as_json:
                    for line in tune_lines(found, max_batch):
                        console.print(line if held is None else f"x{held} replicas, fsdp: {line}")
        if as_json:
            print_answer(
                advice_text.TuneAnswer(
                    workload=workload, searches=found_all, fewest_devices=None, device_trials=[]
                )
            )
            return
        console.print(
            f"next: `accelbench recommend {workload}` answers from these and every stored run"
        )
