"""What a scenario is to the rest of accelbench: a plug-in (`Scenario`) that names how a cell is
measured, which spec knobs are its own and the rules over them, the record it adds to the
metrics (a `Record`), its headline, its lines under the results table and its export columns.

Torch-free: the spec, the store and the reports read plug-ins; only a cell imports `measure`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self, TextIO, TypeVar

from accelbench.records.frozen import Frozen

if TYPE_CHECKING:
    import torch

    from accelbench.records.metrics import Metrics
    from accelbench.records.result import Result, Status
    from accelbench.records.spec import RunSpec
    from accelbench.records.stats import Summary
    from accelbench.workload import Workload

    ModelMeasure = Callable[[RunSpec, Workload, torch.device], Metrics]
    DeviceMeasure = Callable[[RunSpec, torch.device], Metrics]
    ClientMeasure = Callable[[RunSpec], Metrics]

VIEWS = frozenset(
    {
        "batch",
        "scaling",
        "first-epoch",
        "efficiency",
        "latency",
        "input-ceiling",
        "table-1",
        "table-3",
        "projection",
    }
)
"""The report's tables, figures and projections that several scenarios' results can appear in:
throughput against batch, scaling with devices, first against steady epoch, energy and MFU,
batch latency against throughput, the input pipeline's ceiling in the roofline (the loader
alone), PEARC '22 Tables 1 and 3, and projected training time. A
scenario's own figures and tables are its own (Scenario.figures, .table)."""

Namer = Callable[["RunSpec"], str]
"""Names a cell in a line of text (report.cells.describe, or a describer)."""


class Settings(Frozen):
    """A scenario's own knobs: the part of a spec (RunSpec.settings) that only cells of this
    scenario have, declared in the scenario's folder as fields of a subclass, with their
    defaults, documentation (the options' --help) and checks of one field's value. A spec
    reads and writes them flat, beside the knobs every cell shares, so stored records and
    keys do not show the nesting. A scenario without knobs of its own keeps this empty one."""

    @classmethod
    def option_fields(cls, option: str, text: str) -> dict[str, Any]:
        """The fields an option of a form of its own gives (serve's --slo ttft_ms=X,tpot_ms=Y
        or a preset's name), for the command line, which declares the option; AccelbenchError
        naming the fix for text it cannot read."""
        raise NotImplementedError(f"{cls.__name__} has no option --{option}")

    @classmethod
    def of(cls, spec: RunSpec) -> Self:
        """The settings of a spec of this class's scenario (TypeError for any other spec)."""
        found = spec.settings
        if not isinstance(found, cls):
            raise TypeError(f"a {spec.scenario} spec has no {cls.__name__}")
        return found


@dataclass(frozen=True)
class Series:
    """One named measure of a record, as the core reads it (Record.series)."""

    value: float
    unit: str
    interval: tuple[float, float] | None = None
    """Its 95% interval, where it has one."""
    summary: Summary | None = None
    """The samples behind it (a latency's median, p99 and count), where it has them."""
    label: str = ""
    """What it is of, in words ("8192x8192x8192 bfloat16")."""


SERIES = {
    "time_to_target": "s: the training clock's time to reach the target (recommend's "
    "time-to-train, the results table's column)",
    "latency": "ms, with its summary: the latency an objective reads where the steps' is not it",
    "devices": "devices: the devices it measured, where not the spec's (a server's GPUs)",
    "offline": "tokens/s: a server's most, every request at once (MLPerf's Offline rows)",
    "call": "FLOP or B, labelled with its shape: the work of one call of a device kernel",
    "message": "B, labelled with its shape: a collective's whole array (nccl-tests' S)",
}
"""The names of series the core reads, and what it reads them for: a record gives those it has
(a scenario's own views read its record's fields directly)."""


class Record(Frozen):
    """A scenario's own part of the metrics (Metrics.record), stored with its scenario's name
    in `kind`, which picks the class that reads it back (scenarios.record_type). The core never
    asks which class a record is: it reads its status and its series."""

    kind: str

    def status(self) -> tuple[Status, str] | None:
        """A status other than ok that the record gives its result, with the reason; None:
        ok."""
        return None

    def series(self) -> Mapping[str, Series]:
        """Its measures by name (SERIES), those it has."""
        return {}


R = TypeVar("R", bound=Record)


def record_of(result: Result, kind: type[R]) -> R | None:
    """The result's scenario record if it is of this class, else None: for a scenario's own
    code (the core reads series)."""
    record = result.metrics.record if result.metrics else None
    return record if isinstance(record, kind) else None


def series(result: Result, name: str) -> Series | None:
    """The result's series of this name (SERIES), if its record has one."""
    record = result.metrics.record if result.metrics else None
    return None if record is None else record.series().get(name)


@dataclass(frozen=True)
class Headline:
    """The one number a result is read by, with its unit and 95% interval where it has one."""

    value: float
    unit: str
    interval: tuple[float, float] | None = None


def steady_rate(result: Result) -> Headline | None:
    """The headline of scenarios that run steps: the delivered rate over the steady state and
    its interval from batch means."""
    m = result.metrics
    if m is None:
        return None
    low, high = m.delivered.ci_low, m.delivered.ci_high
    interval = None if low is None or high is None else (low, high)
    return Headline(m.items_per_s, f"{m.item_unit}/s", interval)


@dataclass(frozen=True)
class Figure:
    """A figure of the report that only its scenario's results appear in, drawn by the
    scenario's own code (Scenario.figures)."""

    name: str
    """Unique among the report's figures: what report.plotted chooses its results by."""
    draw: Callable[[Sequence[Result]], Iterable[Any]]
    """(results) -> Iterator[report.drawing.Plot]: given every result the figure may draw, it
    draws those of its scenario."""
    per_batch: bool = False
    """It draws the median repeat of each line and batch size; False: each result whole (a
    line of trials, seeds pooled)."""
    any_status: bool = False
    """It draws results whatever their status (runs that never reached their target)."""


@dataclass(frozen=True)
class Export:
    """A format of the field that its scenario's results are exported in (`accelbench export
    --format NAME`), written by the scenario's own code (Scenario.exports)."""

    format: str
    write: Callable[[Iterable[Result], TextIO], tuple[int, int]]
    """(results, out) -> (written, left out): writes those of the results it describes, a
    result at a time."""
    takes: str
    """The results it describes, in words ("serve results")."""
    writes: str
    """What it writes, after a count ("serving trial(s) as llm-d reports")."""
    help: str
    """What it is, in a sentence of export's --help."""
    files: Callable[[Result], list[tuple[str, str]]] | None = None
    """(result) -> [(file name, text)]: the result's documents a file each, written into the
    folder `--out DIR/` names, for tools that read one document a file; None: the format is one
    file."""


def no_rules(spec: RunSpec) -> None:
    """A scenario without rules of its own."""


def runs_anywhere(spec: RunSpec, device_type: str) -> None:
    """A scenario whose cells run on any device type."""


def nothing_to_check(specs: Sequence[RunSpec]) -> None:
    """A scenario with nothing to read or ask before its cells run."""


def no_columns(result: Result) -> dict[str, object]:
    return {}


@dataclass(frozen=True)
class Scenario:
    """One way of measuring a workload, registered by name (scenarios.register): a model
    measured on a device, `measure(spec, workload, device)`. Its two other kinds measure no
    model and take what they need: DeviceScenario and ClientScenario."""

    name: str
    summary: str
    """What it measures, in one line for --help and the docs."""
    measure: str | Callable[..., Any]
    """(spec, workload, device) -> Metrics (a DeviceScenario's (spec, device), a
    ClientScenario's (spec)), or "module:function" naming it: imported only in the cell's
    process, so that reading results never imports torch or httpx."""
    trains: bool = False
    """Takes optimizer steps: gradient accumulation, recompute and training-only precisions
    go with it; inference-only precisions do not."""
    distributes: bool = False
    """May run over several processes (replicas, tensor parallel, pipeline stages, FSDP)."""
    batch_latency: bool = False
    """Each step is one batch's latency (its p99 needs enough batches behind it)."""
    generates: bool = False
    """Needs a model that generates text."""
    settings: type[Settings] = Settings
    """The class of its own knobs (Settings): given with another scenario, they are refused."""
    workloads: tuple[str, ...] = ()
    """What it measures when `run` names no workload (a device scenario's own kernels); empty:
    a workload must be named."""
    rules: Callable[[RunSpec], None] = no_rules
    """Its rules over a spec of it: raise ValueError naming the fix."""
    device_rules: Callable[[RunSpec, str], None] = runs_anywhere
    """Its rules over a spec and the device type it will run on (known once the plan has probed
    the platform): raise ValueError naming the fix."""
    check: Callable[[Sequence[RunSpec]], None] = nothing_to_check
    """Its checks of a plan's cells of it before any runs (files read, a server asked; heavy
    imports inside): raise AccelbenchError naming the fix."""
    record: type[Record] | None = None
    """The class of its part of the metrics, if it adds one."""
    headline: Callable[[Result], Headline | None] = steady_rate
    steps_rate: bool = False
    """Its headline is its steps' steady rate in another unit (micro's TFLOP/s, GB/s), so the
    rules of that rate apply to it as to steady_rate's."""
    verdict_rules: Callable[[Result], list[tuple[Any, str]]] | None = None
    """Its own verdict rules beyond every result's: (validity.Flag, reason) for each broken."""
    objectives: tuple[str, ...] = ()
    """The objectives of `accelbench recommend` its results answer."""
    views: frozenset[str] = frozenset()
    """The report's tables and figures its results appear in (VIEWS)."""
    notes: Callable[[Result, Namer], list[str]] | None = None
    """Its lines under the results table."""
    cell_text: Callable[[Result], str] | None = None
    """Its headline in words as its cell ends; None: the rate of its steps."""
    columns: Callable[[Result], Mapping[str, object]] = no_columns
    """Its own columns of the CSV export: names unique to it, values plain."""
    words: Callable[[RunSpec], list[str]] = field(default=lambda spec: [])
    """Its own settings in a cell's description (prompt and new tokens, a rate)."""
    figures: tuple[Figure, ...] = ()
    """The report's figures only its results appear in (Figure), drawn after the shared ones."""
    table: Callable[[Sequence[Result]], Any] | None = None
    """(results) -> report.tables.Grid | None: its own table over all its results at once (over
    seeds, say), after the results table; None without rows. Its results are then read whole
    for it."""
    exports: tuple[Export, ...] = ()
    """The field's formats its results are exported in (Export); two scenarios may share one."""
    findings: Callable[[Sequence[Result], Namer], list[str]] | None = None
    """Its lines over all its results at once, after each result's own (Scenario.notes); its
    results are then read whole for it."""

    def measure_fn(self) -> ModelMeasure:
        found: ModelMeasure = resolve(self.measure)
        return found

    def cell_words(self, result: Result) -> str | None:
        return self.cell_text(result) if self.cell_text else None

    def lines(self, result: Result, name: Namer) -> list[str]:
        return self.notes(result, name) if self.notes else []

    def verdicts(self, result: Result) -> list[tuple[Any, str]]:
        return self.verdict_rules(result) if self.verdict_rules else []

    @property
    def read_whole(self) -> bool:
        """Whether its table or findings read its results whole (not from their listings)."""
        return self.table is not None or self.findings is not None

    @property
    def rated_by_steps(self) -> bool:
        """Whether its headline is the steady rate of its steps (its epochs, the last epoch's
        time and the rate's own verdict rules then apply to it)."""
        return self.headline is steady_rate or self.steps_rate


@dataclass(frozen=True)
class DeviceScenario(Scenario):
    """Measures the device itself (a kernel, a copy, a collective): no model is built or tried
    before the cell, and `measure` takes (spec, device)."""

    def measure_fn(self) -> DeviceMeasure:  # type: ignore[override]
        found: DeviceMeasure = resolve(self.measure)
        return found


@dataclass(frozen=True)
class ClientScenario(Scenario):
    """Measures a server through its endpoint: nothing is built, fed, placed or checked here,
    the platform is the server's, and `measure` takes the spec alone."""

    def measure_fn(self) -> ClientMeasure:  # type: ignore[override]
        found: ClientMeasure = resolve(self.measure)
        return found


def resolve(target: str | Callable[..., Any]) -> Callable[..., Any]:
    """A callable, or the one "module:function" names."""
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return found
