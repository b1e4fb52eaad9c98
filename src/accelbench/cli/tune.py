"""The command that searches for what to run: tune (the largest and fastest micro batch, the
device-count curve, the fewest devices a sharded model trains on)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

import typer

from accelbench import scenarios
from accelbench.cli.app import DbOption, app, console, counts, key_values
from accelbench.cli.options import spec_help, with_fields
from accelbench.errors import AccelbenchError
from accelbench.orchestration import launch
from accelbench.orchestration.sweep import check_timeout, run_sweep
from accelbench.records import environment
from accelbench.records.result import MEASURED, Result
from accelbench.records.spec import MAX_REPEATS, RunSpec
from accelbench.report.advice import fewest_lines, tune_lines
from accelbench.report.results import cell_line
from accelbench.storage.store import ResultStore

TUNE_KNOBS = (
    "platform",
    "precision",
    "threads",
    "compile",
    "epochs",
    "steps_per_epoch",
    "window_steps",
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
    db: DbOption = None,
    **knobs: Any,
) -> None:
    """Find the largest micro batch that fits and the fastest one, then the device-count curve,
    within a time budget; or the fewest devices a sharded model trains on. Every trial runs in a
    fresh process and is stored like any run."""
    from accelbench.analysis import tuning

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
    if fewest_devices:
        _fewest_devices(base, budget_s, max_devices, timeout_s, db, repeats)
        return
    replica_counts = counts(replicas, "--replicas")
    if not scenarios.get(scenario).distributes and replica_counts != [1]:
        raise AccelbenchError("the device-count curve is for training: leave out --replicas")
    with ResultStore(db) as store:
        console.print(f"tuning {workload} within {budget_s:g} s; trials go to {store.where}")
        trial = _trials(base, store, {}, timeout_s, repeats)
        budget = tuning.Budget(budget_s)
        search = partial(
            tuning.search,
            start=min_batch,
            max_batch=max_batch,
            budget=budget,
            resolution=resolution,
        )
        if base.fsdp:  # sharded, what fits depends on the device count: search at each
            for n in replica_counts:
                found = search(partial(_on, trial, n))
                for line in tune_lines(found, max_batch):
                    console.print(f"x{n} replicas, fsdp: {line}")
        else:
            found = search(
                lambda batch, replicas: trial(batch_size=batch, replicas=replicas),
                replicas=replica_counts,
            )
            for line in tune_lines(found, max_batch):
                console.print(line)
    console.print(
        f"next: `accelbench recommend {workload}` answers from these and every stored run"
    )


def _trials(
    base: RunSpec,
    store: ResultStore,
    envs: dict[str, environment.Environment],
    timeout_s: float,
    repeats: int = 1,
) -> Callable[..., Result]:
    """One trial of a search: `base` with some fields changed, run `repeats` times and stored as
    cells (each device probed once for all the trials, through `envs`), their lines printed;
    the trial is its median run (a failure, if any run failed: memory is not a matter of luck)."""

    def trial(**changes: object) -> Result:
        spec = RunSpec.model_validate(base.model_dump() | changes)
        results = run_sweep(
            [spec.model_copy(update={"repeat": i}) for i in range(repeats)],
            store,
            timeout_s=timeout_s,
            envs=envs,
            on_result=lambda r, skipped: console.print(cell_line(r, skipped)),
        )
        failed = [r for r in results if r.status not in MEASURED]
        if failed:
            return failed[0]
        results.sort(key=lambda r: r.items_per_s or 0)
        return results[(len(results) - 1) // 2]

    return trial


def _fewest_devices(
    base: RunSpec,
    budget_s: float,
    most: int | None,
    timeout_s: float,
    db: str | None,
    repeats: int = 1,
) -> None:
    from accelbench import workloads
    from accelbench.analysis import tuning
    from accelbench.execution import sharding

    if not base.fsdp:
        raise AccelbenchError("--fewest-devices shards the model over the devices: add --fsdp")
    env = launch.probe_environment(base.device)
    most = most or len(env.devices) // base.tensor_parallel
    if workloads.is_user(base.workload):  # a user's code never runs in this process
        start, why = 1, "a user's model is not built here to count its weights: from 1 device"
    else:
        start, why = sharding.fewest_for_state(base, env.devices[0].memory_gib)
    if start > most:
        raise AccelbenchError(f"{why}, more than the {most} to try: give --max-devices")
    console.print(why)
    with ResultStore(db) as store:
        trial = _trials(base, store, {base.device: env}, timeout_s, repeats)
        found = tuning.fewest_devices(
            lambda replicas: trial(replicas=replicas),
            start=start,
            most=most,
            budget=tuning.Budget(budget_s),
        )
    for line in fewest_lines(found, base, most):
        console.print(line)


def _on(trial: Callable[..., Result], replicas: int, batch: int, _: int) -> Result:
    """A batch search's trial held at this many replicas."""
    return trial(batch_size=batch, replicas=replicas)
