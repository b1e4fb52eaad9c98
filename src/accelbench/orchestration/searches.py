"""The searches of `accelbench tune`, run as cells: each trial is `base` with a field or two
changed, run in fresh processes and stored like any run; analysis/tuning.py decides what to try
next. Reachable from Python as from the command line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from accelbench import workloads
from accelbench.analysis import tuning
from accelbench.errors import AccelbenchError
from accelbench.execution import sharding
from accelbench.orchestration import launch
from accelbench.orchestration.sweep import run_sweep
from accelbench.records.environment import Environment
from accelbench.records.result import MEASURED, Result
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.scenarios import get as scenario

OnResult = Callable[[Result, bool], None]
"""Called with each trial's result as it is stored (and whether it was stored before)."""


def trials(
    base: RunSpec,
    store: ResultStore,
    *,
    timeout_s: float,
    repeats: int = 1,
    envs: dict[str, Environment] | None = None,
    on_result: OnResult | None = None,
) -> Callable[..., Result]:
    """One trial of a search: `base` with some fields changed, run `repeats` times and stored as
    cells (each device probed once for all the trials, through `envs`); the trial is its median
    run (a failure, if any run failed: memory is not a matter of luck)."""
    probed = {} if envs is None else envs

    def trial(**changes: object) -> Result:
        spec = RunSpec.model_validate(base.model_dump() | changes)
        results = run_sweep(
            [spec.model_copy(update={"repeat": i}) for i in range(repeats)],
            store,
            timeout_s=timeout_s,
            envs=probed,
            on_result=on_result,
        )
        failed = [r for r in results if r.status not in MEASURED]
        if failed:
            return failed[0]
        results.sort(key=lambda r: r.items_per_s or 0)
        return results[(len(results) - 1) // 2]

    return trial


def batches(
    base: RunSpec,
    trial: Callable[..., Result],
    *,
    budget_s: float,
    max_batch: int,
    resolution: float,
    replica_counts: Sequence[int] = (1,),
) -> list[tuple[int | None, tuning.Search]]:
    """The largest micro batch that fits and the fastest, from base.batch_size up, then the
    fastest at each replica count; with FSDP, where what fits depends on the device count, a
    search at each count. Returns (replicas, or None for one search over all, the search)."""
    if not scenario(base.scenario).distributes and list(replica_counts) != [1]:
        raise AccelbenchError("the device-count curve is for training: leave out --replicas")
    search = partial(
        tuning.search,
        start=base.batch_size,
        max_batch=max_batch,
        budget=tuning.Budget(budget_s),
        resolution=resolution,
    )
    if base.fsdp:
        return [(n, search(partial(_on, trial, n))) for n in replica_counts]
    found = search(
        lambda batch, replicas: trial(batch_size=batch, replicas=replicas),
        replicas=list(replica_counts),
    )
    return [(None, found)]


def fewest_devices_start(base: RunSpec, most: int | None) -> tuple[Environment, int, int, str]:
    """Where the device search starts: the probed environment, the most devices to try (the
    host's, by default), the fewest that can hold the weights and optimizer state, and why."""
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
    return env, most, start, why


def fewest_devices(
    trial: Callable[..., Result], *, start: int, most: int, budget_s: float
) -> tuning.DeviceSearch:
    """The fewest devices a sharded model trains on, trying replica counts from `start`."""
    return tuning.fewest_devices(
        lambda replicas: trial(replicas=replicas),
        start=start,
        most=most,
        budget=tuning.Budget(budget_s),
    )


def _on(trial: Callable[..., Result], replicas: int, batch: int, _: int) -> Result:
    """A batch search's trial held at this many replicas."""
    return trial(batch_size=batch, replicas=replicas)
