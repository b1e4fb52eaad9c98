"""A sweep: the grid of specs from lists of values, each cell run in a child and stored.

A sweep can also be written down in a TOML file, fixed fields and axes:

    [fixed]
    workload = "autoencoder"
    epochs = 3

    [axes]
    batch_size = [10, 128, 256, 512]
    precision = ["fp32", "amp-bf16"]
"""

from __future__ import annotations

import difflib
import itertools
import json
import logging
import math
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from pydantic import Field, ValidationError, field_validator

from accelbench import inputs, scenarios, secrets, workloads
from accelbench.cell import preflight
from accelbench.errors import AccelbenchError, first_invalid
from accelbench.orchestration import forks, launch
from accelbench.records.environment import Environment
from accelbench.records.frozen import Frozen
from accelbench.records.precision import check_supported
from accelbench.records.result import Result, result_key
from accelbench.records.spec import RunSpec, knobs
from accelbench.report.database import ResultStore
from accelbench.storage import exchange

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 3600.0


MAX_CELLS = 10_000
"""The most cells one sweep may have: a day's work even at MIN_CELL_S a cell."""
MIN_CELL_S = 10.0
"""About the least a cell takes here (a fresh process, the model built, two epochs)."""


class SweepFile(Frozen):
    """The contents of a sweep file."""

    fixed: dict[str, Any] = Field(default_factory=dict)
    """Spec fields that every cell shares."""
    axes: dict[str, list[Any]] = Field(default_factory=dict)
    """Spec fields with a list of values each; the grid is their product, in file order."""
    global_batch: int | None = Field(default=None, gt=0)
    """Hold items per optimizer step at this over every micro batch and replica count, by
    setting each cell's grad_accum (hyper-parameters then need no re-tuning when scaling out)."""

    @field_validator("fixed", "axes")
    @classmethod
    def _spec_fields(cls, table: dict[str, Any]) -> dict[str, Any]:
        for name in table:
            if name not in knobs():
                close = difflib.get_close_matches(name, knobs(), n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise ValueError(
                    f"{name} is not a run setting; {hint}`accelbench run --help` lists them"
                )
        return table

    @field_validator("axes")
    @classmethod
    def _no_empty_axis(cls, axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
        empty = [name for name, values in axes.items() if not values]
        if empty:
            raise ValueError(f"axis {empty[0]} has no values")
        return axes

    def specs(self) -> list[RunSpec]:
        both = sorted(set(self.fixed) & set(self.axes))
        if both:
            raise AccelbenchError(f"{both[0]} is both fixed and an axis; keep it in one table")
        count = math.prod(len(values) for values in self.axes.values())
        if count > MAX_CELLS:
            days = count * MIN_CELL_S / 86400
            raise AccelbenchError(
                f"the sweep has {count:,} cells, at least {days:,.1f} days at {MIN_CELL_S:g} s "
                f"a cell: narrow its axes or split it into sweeps of at most {MAX_CELLS:,}"
            )
        specs = grid(self.axes, **self.fixed)
        if self.global_batch is None:
            return specs
        if "grad_accum" in self.fixed or "grad_accum" in self.axes:
            raise AccelbenchError("give --global-batch or --grad-accum, not both")
        return [hold_global_batch(s, self.global_batch) for s in specs]


def hold_global_batch(spec: RunSpec, global_batch: int) -> RunSpec:
    """`spec` with the gradient accumulation that makes its global batch `global_batch`."""
    per_step = spec.batch_size * spec.replicas
    if global_batch % per_step:
        raise AccelbenchError(
            f"global batch {global_batch} is not a multiple of micro batch {spec.batch_size} x "
            f"{spec.replicas} replica(s): choose batch sizes and replica counts that divide it"
        )
    return spec.model_copy(update={"grad_accum": global_batch // per_step})


def load_sweep(path: Path) -> SweepFile:
    """Read and check a sweep file; any problem is an AccelbenchError naming the file."""
    try:
        return SweepFile.model_validate(tomllib.loads(inputs.read_text(path, "sweep file")))
    except tomllib.TOMLDecodeError as exc:
        raise AccelbenchError(f"sweep file {path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError:
        raise AccelbenchError(f"sweep file {path} is not UTF-8 text: save it as UTF-8") from None
    except RecursionError:
        raise AccelbenchError(f"sweep file {path} nests too deep: a sweep file is flat") from None
    except ValidationError as exc:
        where, message = first_invalid(exc)
        raise AccelbenchError(f"sweep file {path}: [{where}] {message}") from exc


def grid(axes: Mapping[str, Sequence[Any]], **fixed: Any) -> list[RunSpec]:
    """Every combination of the values in `axes`, in order, with the `fixed` fields in each."""
    names = list(axes)
    return [
        RunSpec(**fixed, **dict(zip(names, values, strict=True)))
        for values in itertools.product(*(axes[n] for n in names))
    ]


def check_cells(specs: Sequence[RunSpec]) -> list[preflight.Inputs]:
    """check_inputs once for each workload, model args and data the cells use; returns those
    inputs, for preflight.check to try in a child."""
    for scenario in {scenarios.get(s.scenario) for s in specs}:
        scenario.check([s for s in specs if s.scenario == scenario.name])
    distinct: dict[tuple[object, ...], RunSpec] = {}
    for s in specs:
        if isinstance(
            scenarios.get(s.scenario), scenarios.ClientScenario
        ):  # nothing of it runs here
            continue
        if isinstance(scenarios.get(s.scenario), scenarios.DeviceScenario):  # no model to try
            workloads.check(s.workload, s.model_args)
            continue
        if s.framework != "torch" and workloads.is_user(s.workload):  # not a torch model
            check_inputs(s.workload, s.model_args, s.data)
            continue
        key = (
            s.workload,
            json.dumps(s.model_args, sort_keys=True),
            s.data,
            s.tensor_parallel,
            s.sequence_parallel,
            scenarios.get(s.scenario).generates,
        )
        if key not in distinct or s.batch_size < distinct[key].batch_size:
            distinct[key] = s  # tried at the smallest batch asked for: a model may need one
    for s in distinct.values():
        check_inputs(s.workload, s.model_args, s.data)
    return [
        preflight.Inputs(
            workload=s.workload,
            model_args=s.model_args,
            data=s.data,
            tensor_parallel=s.tensor_parallel,
            sequence_parallel=s.sequence_parallel,
            generates=scenarios.get(s.scenario).generates,
            batch_size=s.batch_size,
        )
        for s in distinct.values()
    ]


def check_inputs(workload: str, model_args: dict[str, Any], data_path: str | None) -> None:
    """Raise if the workload, its model args or its data cannot work, as far as can be told
    without running anything: names, values, paths. preflight.check tries the rest in a child."""
    workloads.check(workload, model_args)
    if data_path is None:
        return
    if not data_path.strip() or len(data_path) > 4096:
        raise AccelbenchError("--data is empty or over 4,096 characters: give a local path")
    from accelbench.execution import data  # imports torch

    data.data_format(data_path)


def check_timeout(timeout_s: float) -> None:
    """A cell's time limit must be a positive, finite number of seconds."""
    if not 0 < timeout_s < math.inf:
        raise AccelbenchError(
            f"--timeout-s {timeout_s:g}: give a positive number of seconds, e.g. 3600"
        )


_TRIED: set[str] = set()
"""The inputs preflight.check has passed in this process (_tried_key): a tuning search tries
its workload once, not once per trial; an edited model file is tried again."""


def _tried_key(inputs: preflight.Inputs) -> str:
    """The inputs without their batch, which later trials of a search change."""
    tried = inputs.model_dump(mode="json", exclude={"batch_size"})
    return json.dumps([tried, workloads.edited_at(inputs.workload)], sort_keys=True)


Cell = tuple[RunSpec, Environment]
"""A spec as it will run (device resolved) and the platform it runs on."""


def plan(
    specs: Iterable[RunSpec],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    envs: dict[str, Environment] | None = None,
) -> list[Cell]:
    """Everything checked before a cell runs, nothing stored: the time limit, each input (tried
    once per process, in the child that probes the first device), and whether this platform can
    run each spec. Each device is probed once per call, or once for all the calls given the same
    `envs`."""
    check_timeout(timeout_s)
    specs = list(specs)
    keyed = {_tried_key(i): i for i in check_cells(specs)}
    untried = keyed.keys() - _TRIED
    inputs = [keyed[key] for key in sorted(untried)]
    envs = {} if envs is None else envs
    for device in sorted({s.device for s in specs} - envs.keys()):
        envs[device] = launch.probe_environment(device, inputs, timeout_s)
        inputs = []  # tried once, in the first probe
    launch.preflight_in_child(inputs, timeout_s)
    _TRIED.update(untried)
    cells = []
    for spec in specs:
        env = envs[spec.device]
        check_supported(spec.precision, env.device_type, env.cuda_capability)
        if spec.compile_mode == "reduce-overhead" and env.device_type != "cuda":
            raise AccelbenchError(
                f"--compile-mode reduce-overhead replays CUDA graphs, which {env.device_type} "
                "has none of: give --compile-mode default or max-autotune"
            )
        launch.check_launchable(spec, env)
        try:
            scenarios.get(spec.scenario).device_rules(spec, env.device_type)
        except ValueError as exc:
            raise AccelbenchError(str(exc)) from None
        update = {"device": env.device_type, "code_digest": workloads.file_digest(spec.workload)}
        cells.append((spec.model_copy(update=update), env))
    return cells


def run_cells(
    cells: Sequence[Cell],
    store: ResultStore,
    *,
    force: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[RunSpec], None] | None = None,
    on_result: Callable[[Result, bool], None] | None = None,
    stream: TextIO | None = None,
    tags: dict[str, str] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> list[Result]:
    """Run each planned cell in a fresh process and store it as it finishes; each cell's output
    is kept in the log directory and, with `stream`, copied there as it comes; `on_phase` is
    told each phase a cell begins.

    A cell already in the store for this platform is skipped (its stored result is returned and
    reported with `skipped=True`) unless it was interrupted, or `force` measures it again as
    a new repeat beside it: a sweep killed at any
    point and run again does what is left, nothing twice. A failing cell is stored with its
    status and the sweep goes on; SIGTERM or Ctrl-C stores the cell in flight as interrupted
    and raises launch.Interrupted."""
    with launch.sigterm_interrupts():
        return [
            _run_cell(
                spec, env, store, force, timeout_s, on_start, on_result, stream, tags, on_phase
            )
            for spec, env in cells
        ]


def run_sweep(
    specs: Iterable[RunSpec],
    store: ResultStore,
    *,
    force: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_start: Callable[[RunSpec], None] | None = None,
    on_result: Callable[[Result, bool], None] | None = None,
    envs: dict[str, Environment] | None = None,
) -> list[Result]:
    """plan, then run_cells: a spec that cannot run raises before any cell starts. Its cells
    are forked by one cell server (forks.serving)."""
    with forks.serving():
        cells = plan(specs, timeout_s, envs)
        return run_cells(
            cells, store, force=force, timeout_s=timeout_s, on_start=on_start, on_result=on_result
        )


def _run_cell(
    spec: RunSpec,
    env: Environment,
    store: ResultStore,
    force: bool,
    timeout_s: float,
    on_start: Callable[[RunSpec], None] | None,
    on_result: Callable[[Result, bool], None] | None,
    stream: TextIO | None = None,
    tags: dict[str, str] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> Result:
    """The stored result of a cell, else its new one, stored the moment it exists with the
    user's command (not the child's) and labels. An interrupted cell is stored as such before
    the interruption goes on up. With `force` a stored cell is measured again as its next free
    repeat: a re-measurement never replaces a measurement."""
    stored = stored_result(store, spec, env)
    if stored is not None and not force:
        if on_result:
            on_result(stored, True)
        return stored
    while stored is not None:
        spec = spec.model_copy(update={"repeat": spec.repeat + 1})
        stored = store.get(result_key(spec, env))
    if on_start:
        on_start(spec)
    named = {"argv": secrets.scrub_argv(sys.argv), "tags": tags or {}}
    try:
        found = launch.run_in_child(spec, env, timeout_s, stream, on_phase)
        result = found.model_copy(update=named)
    except launch.Interrupted as exc:
        if exc.result is not None:
            exc.result = exc.result.model_copy(update=named)
            with launch.signals_deferred():
                _store(store, exc.result)
            if on_result:
                on_result(exc.result, False)
        raise
    with launch.signals_deferred():  # a signal now would lose a finished cell
        _store(store, result)
    log.info("%s: %s", spec.workload, result.status)
    if on_result:
        on_result(result, False)
    return result


def stored_result(store: ResultStore, spec: RunSpec, env: Environment) -> Result | None:
    """The cell's stored result, which a sweep skips it for; None if there is none, or only an
    interrupted one (run again)."""
    stored = store.get(result_key(spec, env))
    return None if stored is None or stored.status == "interrupted" else stored


def _store(store: ResultStore, result: Result) -> None:
    """Store a finished cell; if the database refuses it for good, keep it in a file that
    `accelbench import` takes back, and stop the sweep saying where."""
    try:
        store.put(result)
    except AccelbenchError as exc:
        kept = exchange.keep_unsaved(result)
        raise AccelbenchError(
            f"{exc}; the cell's result is kept in {kept}: `accelbench import {kept}` stores it "
            "once the database works again"
        ) from exc
