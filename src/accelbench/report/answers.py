"""The commands' answers as data (`--format json`): one JSON document on standard output, and
nothing else there. Each answer's form is a model, named by its `format` and versioned by its
`version`, raised with any change to its form: a command's own beside its words (report.advice,
.compare, .history, .fleet, .acceptance), the result rows they share and the answers of run,
list and suites here (every() finds them all). Its JSON Schema is docs/schemas/FORMAT.json,
written from the model by scripts/schemas.py (the suite checks the files are current and that
each command's output validates against its file). docs/formats.md describes them in words."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from accelbench.records.environment import Environment
from accelbench.records.frozen import Frozen

if TYPE_CHECKING:
    from accelbench.records.result import Result


class Headline(Frozen):
    value: float
    unit: str
    interval: list[float] | None
    """Its 95% interval [low, high], where it has one."""


class Row(Frozen):
    """One stored result, as the results table shows it."""

    key: str
    """The stored result's key (`accelbench results`, `export`)."""
    cell: str
    """The cell in words."""
    workload: str
    scenario: str
    framework: str
    platform: str
    hostname: str
    status: str
    """ok, or what ended it: oom, diverged, timeout, error, interrupted, ..."""
    reason: str | None
    headline: Headline | None
    """The number the result is read by, where it has one."""
    verdict: str
    """"valid", its flags ("contended, noisy"), or its status where it measured nothing."""
    flags: list[str]
    """Its flags (docs/methodology.md): none for a valid result or one that measured nothing."""


class RunAnswer(Frozen):
    """`accelbench run --format json`: each cell of the sweep, stored or skipped as stored."""

    format: Literal["accelbench-run"] = "accelbench-run"
    version: Literal[1] = 1
    results: list[Row]


class Workload(Frozen):
    name: str
    description: str


class ListAnswer(Frozen):
    """`accelbench list --format json`: the registered workloads, and the forms of the others."""

    format: Literal["accelbench-list"] = "accelbench-list"
    version: Literal[1] = 1
    workloads: list[Workload]
    forms: list[str]
    """Workloads named by a form: timm/<model>, hf/<model_type>, a model file, ..."""
    micro: list[str]
    """The kernels of micro/<kind> (--scenario micro)."""


class SuitePart(Frozen):
    devices: list[str]
    """The device families it runs on; empty: any device."""
    figure: str
    """The published figure its cells are set beside."""
    cells: int


class Suite(Frozen):
    name: str
    description: str
    parts: list[SuitePart]


class SuitesAnswer(Frozen):
    """`accelbench suites --format json`: what `run --suite NAME` runs."""

    format: Literal["accelbench-suites"] = "accelbench-suites"
    version: Literal[1] = 1
    suites: list[Suite]


class EnvAnswer(Frozen):
    """`accelbench env --format json`: the platform as a cell would capture it (the record's
    `env`: devices, host CPU, NUMA nodes, versions, the numeric variables kept)."""

    format: Literal["accelbench-env"] = "accelbench-env"
    version: Literal[1] = 1
    environment: Environment


def dump(answer: Frozen) -> str:
    """The answer as one JSON document and a newline."""
    return answer.model_dump_json(indent=1) + "\n"


def row(result: Result, name: str, verdict: str) -> Row:
    found = result.headline
    return Row(
        key=result.key,
        cell=name,
        workload=result.spec.workload,
        scenario=result.spec.scenario,
        framework=result.spec.framework,
        platform=result.platform,
        hostname=result.env.hostname,
        status=result.status,
        reason=result.reason,
        headline=None
        if found is None
        else Headline(
            value=found.value,
            unit=found.unit,
            interval=None if found.interval is None else list(found.interval),
        ),
        verdict=verdict,
        flags=[] if verdict in ("valid", result.status) else verdict.split(", "),
    )


def plain_row(result: Result) -> Row:
    """A result on its own, as the table names and judges it alone."""
    from accelbench.analysis import validity
    from accelbench.report.cells import describe

    return row(result, describe(result.spec), validity.verdict_text(result))


def every() -> dict[str, type[Frozen]]:
    """Every answer's model by its format: what scripts/schemas.py writes a schema for. Each
    command's own answer is defined beside its words (report.advice, .compare, .history, .fleet,
    .acceptance); the answers of several are here."""
    from accelbench.report import acceptance, advice, compare, fleet, history

    models: list[type[Frozen]] = [
        RunAnswer,
        ListAnswer,
        SuitesAnswer,
        EnvAnswer,
        advice.RecommendAnswer,
        advice.TuneAnswer,
        compare.ReferenceAnswer,
        compare.ReferencesAnswer,
        compare.CompareAnswer,
        history.HistoryAnswer,
        fleet.FleetAnswer,
        acceptance.AcceptAnswer,
        acceptance.RooflineAnswer,
    ]
    return {model.model_fields["format"].default: model for model in models}
