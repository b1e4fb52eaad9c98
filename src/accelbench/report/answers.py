"""The commands' answers as data (`--format json`): one JSON document on standard output, and
nothing else there. Each answer's form is a model here, named by its `format` and versioned by
its `version`, raised with any change to its form; its JSON Schema is docs/schemas/FORMAT.json,
written from the model by scripts/schemas.py (the suite checks the files are current and that
each command's output validates against its file). docs/formats.md describes them in words."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from accelbench.records.frozen import Frozen

if TYPE_CHECKING:
    from accelbench.analysis import acceptance, advice, fleet, references, roofline, tuning
    from accelbench.analysis.objectives import Constraints
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


class Option(Frozen):
    """A configuration on a platform: the runs (repeats, seeds) it rests on and the objective's
    value with its interval."""

    cell: str
    batch_size: int
    global_batch: int
    num_devices: int
    precision: str
    framework: str
    value: float
    low: float | None
    high: float | None
    runs: list[str]
    """The stored results' keys."""


class PlatformAdvice(Frozen):
    platform: str
    best: Option | None
    """None: no configuration meets the objective and constraints."""
    confidence: str | None
    """high, few-runs, low, alone, no-interval or no-runner-up-interval (docs/advice.md)."""
    runner_up: Option | None
    batch_range: list[int]
    """The micro batches within 5% of the best's throughput (seed 003's effective range)."""
    trade_offs: list[Option]
    """Configurations none beats on throughput, devices, p99 latency and energy together."""
    left_out: dict[str, int]
    """Measured runs the constraints or their verdicts left out, by reason."""


class Published(Frozen):
    """A published figure, labelled as such: never part of the answer."""

    platform: str
    num_devices: int
    value: float
    unit: str
    source: str


class RecommendAnswer(Frozen):
    """`accelbench recommend --format json`: per platform, the best configuration first."""

    format: Literal["accelbench-recommend"] = "accelbench-recommend"
    version: Literal[1] = 1
    workload: str
    objective: str
    unit: str
    """The objective's unit (items/s, s, J/item, $ per million items, ...)."""
    scenarios: list[str]
    constraints: dict[str, Any]
    """Those given, by name (global_batch, max_devices, memory_headroom_pct, ...)."""
    platforms: list[PlatformAdvice]
    published: list[Published] | None
    """With --reference: the best published figure on each other platform."""


class ReferenceMatch(Frozen):
    key: str
    cell: str
    workload: str
    platform: str
    measured: float
    published: float
    unit: str
    per_device: bool
    """Both figures per device, as the device counts differ."""
    ratio: float
    agreement: str
    """agrees (within the tolerance), below-reference or above-reference."""
    causes: list[str]
    """What the record shows could explain a disagreement: its flags, the differences."""
    source: str
    table: str


class ReferenceAnswer(Frozen):
    """`accelbench compare --reference --format json`."""

    format: Literal["accelbench-reference"] = "accelbench-reference"
    version: Literal[1] = 1
    tolerance_pct: float
    matches: list[ReferenceMatch]
    unmatched: list[list[str]]
    """[workload, platform] of stored runs with no published figure of their device family."""


class Band(Frozen):
    """A configuration's repeats: the median rate and the span of their 95% intervals."""

    median: float
    low: float | None
    high: float | None
    runs: int


class Ratio(Frozen):
    cell: str
    workload: str
    platform: str
    value: str
    baseline: str
    ratio: float
    interval: list[float] | None
    ranking: str
    """faster, slower, overlap, no-interval, contended or drifting."""
    measured: Band
    reference: Band


class ValueSummary(Frozen):
    value: str
    baseline: str
    geomean: float | None
    matched: int
    faster: int
    slower: int


class Unmatched(Frozen):
    cell: str
    workload: str
    platform: str
    missing_baseline: str | None
    nearest: list[list[Any]]
    """[field, its value, the nearest other's] that kept it apart."""


class CompareAnswer(Frozen):
    """`accelbench compare --by FIELD --format json` (report.compare.ratios_json)."""

    format: Literal["accelbench-compare"] = "accelbench-compare"
    version: Literal[1] = 1
    by: str
    baseline: str | None
    ratios: list[Ratio]
    summary: list[ValueSummary]
    unmatched: list[Unmatched]


class HistoryRun(Frozen):
    at: str
    """When it was stored (ISO 8601)."""
    key: str
    value: float
    flagged: bool


class Change(Frozen):
    at: str
    """Its first run after the change."""
    pct: float
    interval_pct: list[float]
    p: float
    """Welch's p-value."""
    moved: dict[str, list[str | None]]
    """Each captured field that changed there: [old, new]."""


class HistorySeries(Frozen):
    cell: str
    host: str
    unit: str
    runs: list[HistoryRun]
    changes: list[Change]


class HistoryAnswer(Frozen):
    """`accelbench history --format json` (report.history.document)."""

    format: Literal["accelbench-history"] = "accelbench-history"
    version: Literal[1] = 1
    series: list[HistorySeries]


class Node(Frozen):
    name: str
    """The node's host name."""
    rate: float
    """The median of its measured repeats, items/s."""
    runs: int
    z: float
    """Its modified z-score in the fleet (median and MAD)."""
    p_slower: float | None
    """The rank test's one-sided p-value that its runs lie below the others' (None: too few)."""
    outlier: bool


class FleetCell(Frozen):
    cell: str
    platform: str
    median: float
    nodes: list[Node]
    judged: bool
    """Enough nodes to judge (three or more)."""
    left_out: int
    """Results not counted: contended, or without a rate."""
    detectable: float | None
    """The smallest slowdown (a share of the median) a node would be found at."""


class FleetAnswer(Frozen):
    """`accelbench fleet --format json`: each cell run on two nodes or more of a platform."""

    format: Literal["accelbench-fleet"] = "accelbench-fleet"
    version: Literal[1] = 1
    cells: list[FleetCell]


class Judged(Frozen):
    key: str
    cell: str
    platform: str
    value: float | None
    baseline: float | None
    ratio: float | None
    outcome: str
    """pass, fail or no baseline."""
    source: str


class AcceptAnswer(Frozen):
    """`accelbench accept --format json`."""

    format: Literal["accelbench-accept"] = "accelbench-accept"
    version: Literal[1] = 1
    min_ratio: float
    judge: str
    """value or interval: what must reach min_ratio x the baseline."""
    results: list[Judged]


class Ceiling(Frozen):
    name: str
    """compute, memory, communication or input."""
    share: float
    """The model's reach: its rate over the ceiling."""
    evidence: str


class Roof(Frozen):
    key: str
    cell: str
    platform: str
    ceilings: list[Ceiling]
    binding: str | None
    """The ceiling that binds it, where it reaches one closely enough."""


class RooflineAnswer(Frozen):
    """`accelbench roofline --format json`."""

    format: Literal["accelbench-roofline"] = "accelbench-roofline"
    version: Literal[1] = 1
    results: list[Roof]


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


class Trial(Frozen):
    """A trial of the search: its micro batch (or device count) and its stored result."""

    at: int
    result: Row


class BatchSearch(Frozen):
    replicas: int | None
    """With --fsdp, the replica count this search held (what fits depends on it); else None."""
    largest_fit: int | None
    first_oom: int | None
    fastest: int | None
    batch_range: list[int]
    """The micro batches within 5% of the fastest one's throughput."""
    trials: list[Trial]
    scaling: list[Trial]
    """The fastest micro batch at each replica count asked for (`at`: the count)."""
    budget_spent: bool


class TuneAnswer(Frozen):
    """`accelbench tune --format json`: the searches' findings and every trial."""

    format: Literal["accelbench-tune"] = "accelbench-tune"
    version: Literal[1] = 1
    workload: str
    searches: list[BatchSearch]
    """One a replica count held (--fsdp), else one."""
    fewest_devices: int | None
    """With --fewest-devices: the fewest devices it trained on (searches is then empty)."""
    device_trials: list[Trial]


def dump(answer: Frozen) -> str:
    """The answer as one JSON document and a newline."""
    return answer.model_dump_json(indent=1) + "\n"


def row(result: Result, name: str, verdict: str) -> Row:
    from accelbench import scenarios

    found = scenarios.get(result.spec.scenario).headline(result)
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


def option(o: advice.Option) -> Option:
    from accelbench.report.cells import describe

    spec = o.result.spec
    return Option(
        cell=describe(spec),
        batch_size=spec.batch_size,
        global_batch=spec.global_batch,
        num_devices=o.result.num_devices,
        precision=spec.precision,
        framework=spec.framework,
        value=o.value,
        low=o.low,
        high=o.high,
        runs=[r.key for r in o.runs],
    )


def recommendation(
    workload: str,
    objective: str,
    unit: str,
    read: Sequence[str],
    constraints: Constraints,
    found: Sequence[advice.Advice],
    published: Sequence[references.Reference] | None,
) -> RecommendAnswer:
    given = {k: v for k, v in dataclasses.asdict(constraints).items() if v not in (None, {})}
    return RecommendAnswer(
        workload=workload,
        objective=objective,
        unit=unit,
        scenarios=list(read),
        constraints=given,
        platforms=[
            PlatformAdvice(
                platform=a.platform,
                best=option(a.options[0]) if a.options else None,
                confidence=str(a.confidence.level) if a.confidence else None,
                runner_up=(
                    option(a.confidence.runner_up)
                    if a.confidence and a.confidence.runner_up
                    else None
                ),
                batch_range=list(a.batch_range),
                trade_offs=[option(o) for o in a.pareto],
                left_out={str(why): n for why, n in a.excluded.items()},
            )
            for a in found
        ],
        published=None
        if published is None
        else [
            Published(
                platform=r.platform,
                num_devices=r.num_devices,
                value=r.value,
                unit=r.unit,
                source=r.source,
            )
            for r in published
        ],
    )


def reference_answer(
    matches: Sequence[references.Match], unmatched: Sequence[tuple[str, str]], tolerance_pct: float
) -> ReferenceAnswer:
    from accelbench.report.cells import describe

    found = []
    for m in matches:
        agreement, causes = m.verdict(tolerance_pct)
        found.append(
            ReferenceMatch(
                key=m.result.key,
                cell=describe(m.result.spec),
                workload=m.result.spec.workload,
                platform=m.result.platform,
                measured=m.measured,
                published=m.published,
                unit=m.reference.unit,
                per_device=m.per_device,
                ratio=m.ratio,
                agreement=str(agreement),
                causes=causes,
                source=m.reference.source,
                table=m.reference.table,
            )
        )
    return ReferenceAnswer(
        tolerance_pct=tolerance_pct, matches=found, unmatched=[list(u) for u in unmatched]
    )


def fleet_answer(cells: Sequence[fleet.FleetCell]) -> FleetAnswer:
    from accelbench.report.cells import describe

    found = []
    for c in cells:
        outliers = {n.name for n in c.outliers}
        nodes = [
            Node(
                name=n.name,
                rate=n.rate,
                runs=n.runs,
                z=n.z,
                p_slower=n.p_slower,
                outlier=n.name in outliers,
            )
            for n in c.nodes
        ]
        found.append(
            FleetCell(
                cell=describe(c.example.spec),
                platform=c.example.platform,
                median=c.median,
                nodes=nodes,
                judged=c.judged,
                left_out=c.left_out,
                detectable=c.detectable,
            )
        )
    return FleetAnswer(cells=found)


def accept_answer(judged: Sequence[acceptance.Judged], rule: acceptance.Rule) -> AcceptAnswer:
    from accelbench.report.cells import describe

    return AcceptAnswer(
        min_ratio=rule.min_ratio,
        judge=rule.judge,
        results=[
            Judged(
                key=j.result.key,
                cell=describe(j.result.spec),
                platform=j.result.platform,
                value=j.result.items_per_s,
                baseline=j.baseline,
                ratio=j.ratio,
                outcome=str(j.outcome),
                source=j.source,
            )
            for j in judged
        ],
    )


def roofline_answer(roofs: Sequence[roofline.Roof]) -> RooflineAnswer:
    from accelbench.report.cells import describe

    return RooflineAnswer(
        results=[
            Roof(
                key=r.result.key,
                cell=describe(r.result.spec),
                platform=r.result.platform,
                ceilings=[
                    Ceiling(name=c.name, share=c.share, evidence=c.evidence) for c in r.ceilings
                ],
                binding=r.binding.name if r.binding else None,
            )
            for r in roofs
        ]
    )


def plain_row(result: Result) -> Row:
    """A result on its own, as the table names and judges it alone."""
    from accelbench.analysis import validity
    from accelbench.report.cells import describe

    return row(result, describe(result.spec), validity.verdict_text(result))


def batch_search(found: tuning.Search, replicas: int | None) -> BatchSearch:
    from accelbench.analysis import advice

    fastest = found.fastest
    near = (
        advice.batch_range(found.trials[fastest], list(found.trials.values()))
        if fastest is not None
        else []
    )
    return BatchSearch(
        replicas=replicas,
        largest_fit=found.largest_fit,
        first_oom=found.first_oom,
        fastest=fastest,
        batch_range=list(near),
        trials=[Trial(at=b, result=plain_row(r)) for b, r in sorted(found.trials.items())],
        scaling=[Trial(at=n, result=plain_row(r)) for n, r in sorted(found.scaling.items())],
        budget_spent=found.spent,
    )


ANSWERS: Mapping[str, type[Frozen]] = {
    model.model_fields["format"].default: model
    for model in (
        RunAnswer,
        ListAnswer,
        RecommendAnswer,
        ReferenceAnswer,
        CompareAnswer,
        HistoryAnswer,
        FleetAnswer,
        AcceptAnswer,
        RooflineAnswer,
        SuitesAnswer,
        TuneAnswer,
    )
}
"""Every answer's model by its format: what scripts/schemas.py writes a schema for."""
