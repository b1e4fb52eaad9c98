"""A sweep: the grid of specs from lists of values, each cell run in a child and stored."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from accelbench import launch
from accelbench.environment import Environment
from accelbench.precision import check_supported
from accelbench.result import Result, result_key
from accelbench.spec import RunSpec
from accelbench.store import ResultStore

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3600.0


def grid(axes: Mapping[str, Sequence[Any]], **fixed: Any) -> list[RunSpec]:
    """Every combination of the values in `axes`, in order, with the `fixed` fields in each."""
    names = list(axes)
    return [
        RunSpec(**fixed, **dict(zip(names, values, strict=True)))
        for values in itertools.product(*(axes[n] for n in names))
    ]


def run_sweep(
    specs: Iterable[RunSpec],
    store: ResultStore,
    *,
    force: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[RunSpec], None] | None = None,
    on_result: Callable[[Result, bool], None] | None = None,
) -> list[Result]:
    """Run each spec in a fresh process and store it as it finishes.

    A cell already in the store for this platform is skipped (its stored result is returned and
    reported with `skipped=True`) unless `force`. A failing cell is stored with its status and the
    sweep goes on. A spec the platform cannot run raises before any cell starts.
    """
    specs = list(specs)
    envs = {device: launch.probe_environment(device) for device in {s.device for s in specs}}
    cells: list[tuple[RunSpec, Environment]] = []
    for spec in specs:
        env = envs[spec.device]
        check_supported(spec.precision, env.device_type, env.cuda_capability)
        cells.append((spec.model_copy(update={"device": env.device_type}), env))

    results = []
    for spec, env in cells:
        stored = None if force else store.get(result_key(spec, env))
        if stored is not None:
            results.append(stored)
            if on_result:
                on_result(stored, True)
            continue
        if on_start:
            on_start(spec)
        result = launch.run_in_child(spec, env, timeout_s)
        store.put(result)
        log.info("%s: %s", spec.workload, result.status)
        results.append(result)
        if on_result:
            on_result(result, False)
    return results
