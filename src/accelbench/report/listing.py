"""A result as the results table and its notes show it, computed once, when the result is
stored: a site database's listing then reads a few hundred bytes a row and validates no record.

What a row says about itself (its cells, its verdict's own flags, its lines) is kept as text;
what depends on the other rows of a listing (the knobs that differ, the repeats' spread, the
speed-up over a one-replica base, compile's pay-off) is kept as the numbers and the hashed keys
that those need, and computed per listing (report.results). A listing names the code that made
it (VERSION); one from other code is made again from its record when read."""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from functools import cache
from typing import Any, NamedTuple

import orjson

from accelbench import scenarios, secrets
from accelbench.analysis import fleet, scaling, validity
from accelbench.records.environment import Environment
from accelbench.records.frozen import kept
from accelbench.records.result import MEASURED, Result, cell_hash
from accelbench.records.spec import RunSpec, knobs, sorted_json, spec_dump
from accelbench.report.cells import (
    SHOWN,
    ci_text,
    configuration,
    describe,
    label,
    last_epoch_text,
    mfu_text,
    rate_text,
    shown_invalid,
    wait_text,
)
from accelbench.report.roles import Kind, Point, Role, roles
from accelbench.storage.schema import decoded

VERSION = 12
"""Made again from the records when it changes: raise it with any change to what a listing
holds or to the text and rules it was computed with (a cell's format, a verdict rule, a line),
or to a CSV's flat row (report.tabular.flat), which is stored, made again and trusted with it."""

NAME = "\x00"
"""Where a line names its cell: the name depends on the listing's knobs, so it is put in when
the line is shown (no stored text holds the character: inert text has no control ones)."""


class Listing(NamedTuple):
    """A tuple of its fields in their order, which a stored listing holds as a JSON array: read
    back, a site's 100,000 are made by one tuple call each (as a frozen dataclass, each field's
    assignment was a call: 1.2 s of making them)."""

    key: str
    version: int
    platform: str
    status: str
    scenario: str
    label: str
    words: str
    """describe(spec): the cell in words, without the knobs that a listing adds."""
    repeat: int
    """Its repeat index, which label and words name after the workload where not 0."""
    config: str
    """configuration() without batch and replicas, which the table has columns for."""
    knobs: dict[str, Any]
    """The spec's fields that `cells.differing` may name, where not at their default."""
    replicas: int
    batch_size: int
    items_per_s: float | None
    cells: Sequence[str]
    """Last epoch, the headline in its own unit, its 95% interval, MFU and input wait, as the
    table shows them."""
    metrics: bool
    flags: Sequence[str]
    """The verdict's own flags (validity.verdict without repeats), in order."""
    target_pct: float
    """The spread beyond which the cell's repeats are noisy."""
    reasons: Sequence[str]
    """Why it is not valid: the status's reason, or each flag's."""
    lines: Sequence[Sequence[str]]
    """Its tokens, per-rank and scenario lines (results.tokens_line, rank_line, Scenario.lines)."""
    cell: str
    alone: str
    """Its cell with any accumulation: what a multi-replica cell's `base` names."""
    base: str
    """Its one-replica cell, with any accumulation."""
    eager: str
    """Its cell without torch.compile."""
    threads: int
    compiled: bool
    first_step_ms: float | None
    steady_ms: float | None
    peak_source: str | None
    whole: bool
    """Whether its scenario's table or findings over several results need its whole record
    (Scenario.read_whole: time to train's): those few are read for a listing."""
    latency: Sequence[float] | None
    """A batch-latency result's steady batches: median and p99 latency (ms) and how many there
    were, for the sweep's latency headlines (report.inference.headlines); None for others."""
    unit: str
    """What its items are (the metrics' item_unit)."""
    batchless: str
    """Its cell but the batch size: the group a batch sweep's headlines are chosen in."""
    hostname: str
    fleet_cell: str
    """Its cell without the platform: the group the fleet judges nodes in (analysis.fleet)."""
    fleet_counted: bool
    """Whether the fleet counts its rate (analysis.fleet.point's rule)."""
    roles: Sequence[Sequence[Any]]
    """The parts it may take in the report's figures (report.roles), each as [figure, group,
    kind's name, x, config]: the figures choose what they draw from these."""
    interval: Sequence[float] | None
    """The headline's 95% interval (compare reads it, with the flags, from the listing)."""
    spec: str
    """As JSON, the spec's fields not at their default (changed(); whole() gives its dump): with
    the fingerprint, what compare matches cells on (records.result.cell_of); the CSV's spec
    columns."""
    fingerprint: str
    """As JSON, the environment's fingerprint (Environment.fingerprint)."""
    software: str
    """As JSON, the captured software history attributes a change to (Environment.software),
    a variable named like a secret masked (an older record may hold one)."""

    @property
    def fleet_point(self) -> fleet.Point:
        """What the fleet needs of the result, so that none is read whole for it."""
        return fleet_point(self.key, [getattr(self, name) for name in FLEET_POINT])

    def plot_point(self, verdict: str | None = None) -> Point | None:
        """What the figures' choice needs of the result (report.plotted), with `verdict` (the
        listing's, Rows.verdict_text: its repeats counted), else its own; None if no figure
        draws it."""
        if not self.roles:
            return None
        if verdict is None:
            verdict = (", ".join(self.flags) or "valid") if self.status in MEASURED else self.status
        return Point(
            self.key, self.platform, self.items_per_s, verdict, self.knobs, _roles(self.roles)
        )

    def dumps(self) -> str:
        """A JSON array of the fields in their order (a third quicker to read than an object),
        by orjson (a sixth of json's time); by json where a number is NaN or infinite, which
        orjson would write as null (a hostile import's rate), or an integer is past 64 bits."""
        numbers = (
            self.items_per_s,
            self.target_pct,
            self.first_step_ms,
            self.steady_ms,
            *(self.latency or ()),
            *(self.interval or ()),
            *self.knobs.values(),
            *(role[3] for role in self.roles),
        )
        if all(type(n) is not float or math.isfinite(n) for n in numbers):
            with suppress(orjson.JSONEncodeError):
                return orjson.dumps(tuple(self)).decode()
        return json.dumps(self, separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> Listing | None:
        """The stored listing; None if other code made it (another VERSION, another form)."""
        if (data := _stored(text)) is None:
            return None
        values = _read(data)
        knobs = values[_KNOBS]
        if knobs and type(knobs) is dict and _past_64_bits(knobs):  # read by json, whole
            knobs = values[_KNOBS] = json.loads(text)[_KNOBS]
        with suppress(TypeError):  # a list or dict among them (model_args): kept as read
            # Keyed with each value's type: 1, 1.0 and True are equal keys, not equal knobs.
            held = tuple((name, type(v), v) for name, v in knobs.items())
            values[_KNOBS] = _ALL_KNOBS.setdefault(held, knobs)
        return cls._make(values)


def _past_64_bits(knobs: dict[str, Any]) -> bool:
    """Whether a float among the knobs (or a model_args table's) may be an integer past 64 bits,
    which orjson reads as a float and json whole (two such knobs would read as equal)."""
    return any(
        (type(v) is float and abs(v) >= 2.0**63) or (type(v) is dict and _past_64_bits(v))
        for v in knobs.values()
    )


FLEET_POINT = ("platform", "fleet_cell", "hostname", "fleet_counted", "items_per_s")
"""The fields the fleet reads of a result (fleet_point), for a database to take them out."""


def fleet_point(key: str, found: Sequence[Any]) -> fleet.Point:
    """analysis.fleet's point of a result, from its listing's FLEET_POINT fields."""
    platform, cell, hostname, counted, rate = found
    return fleet.Point(platform, cell, hostname, counted, rate or 0.0, key)


def positions(names: Sequence[str]) -> list[int]:
    """Where a stored listing holds its version and these fields, for a database to take them
    out of it (Store.listed's listing_at) and items() to read them."""
    return [_NAMES.index("version"), *(_NAMES.index(name) for name in names)]


def items(text: str | None) -> list[Any] | None:
    """The fields a database took out of a stored listing at positions(names), in order; None
    where this VERSION did not make it (or none was made)."""
    data = None if text is None else decoded(text)
    if not isinstance(data, list) or data[0] != VERSION:
        return None
    return data[1:]


def _stored(text: str) -> list[Any] | None:
    """A stored listing's fields as JSON holds them; None unless this VERSION made it."""
    try:
        data = decoded(text)
    except ValueError:
        return None
    if not isinstance(data, list) or len(data) != _FIELDS or data[1] != VERSION:
        return None
    return data


_NAMES = list(Listing._fields)
_FIELDS = len(_NAMES)
_TEXTS = [_NAMES.index(name) for name in ("cells", "flags", "reasons")]
_NUMBERS = [_NAMES.index(name) for name in ("interval", "latency")]
_LINES = _NAMES.index("lines")
_ROLES = _NAMES.index("roles")
_ALL_ROLES: dict[tuple[Any, ...], tuple[Any, ...]] = {}
"""Each distinct `roles` read back, held once: the repeats of a cell on every host have the
same (at 100k listings, 56 MB held otherwise)."""
_KNOBS = _NAMES.index("knobs")
_ALL_KNOBS: dict[tuple[Any, ...], dict[str, Any]] = {}
"""Each distinct `knobs` read back, held once, for the same reason (read only, as every
listing's is)."""


@cache
def _roles(roles: Sequence[Sequence[Any]]) -> tuple[Role, ...]:
    """A listing's roles as Roles, made once for each distinct one: a site's 100,000 listings
    have a few thousand (the repeats of a cell on every host have the same)."""
    return tuple(
        Role(figure, group, Kind[kind], x, config) for figure, group, kind, x, config in roles
    )


def _read(data: list[Any]) -> list[Any]:
    """A stored listing's fields as a Listing holds them, by what each field is: its texts
    interned, its lists as tuples of interned texts or of numbers, and its roles as tuples held
    once for all listings with the same. Where a field is not what this VERSION writes (a
    database another program wrote into), each value is shared whatever it is (_shared)."""
    values: list[Any] = [sys.intern(v) if type(v) is str else v for v in data]
    try:
        for at in _TEXTS:
            values[at] = tuple(map(sys.intern, values[at]))
        for at in _NUMBERS:
            if values[at] is not None:
                values[at] = tuple(values[at])
        values[_LINES] = tuple(tuple(map(sys.intern, lines)) for lines in values[_LINES])
        roles = tuple(  # [figure, group (a list, a text or null), kind, x, config]
            (figure, tuple(group) if type(group) is list else group, kind, x, config)
            for figure, group, kind, x, config in values[_ROLES]
        )
        values[_ROLES] = _ALL_ROLES.setdefault(roles, roles)
    except (TypeError, ValueError):
        values = list(map(_shared, data))
        values[_ROLES] = _ALL_ROLES.setdefault(values[_ROLES], values[_ROLES])
    return values


def _shared(value: Any) -> Any:
    """A value read back with its strings interned (a site's rows repeat the same platforms,
    words, cells and reasons, and hold each once) and its sequences as tuples (an empty one is
    the one empty tuple: 100k listings held 1.25M lists, 58 MB)."""
    kind = type(value)  # JSON's own types: no subclass to allow for
    if kind is str:
        return sys.intern(value)
    if kind is list:  # its scalars inline: a third of a site's listings' reading was calls
        return tuple(
            [
                sys.intern(v) if type(v) is str else _shared(v) if type(v) is list else v
                for v in value
            ]
        )
    return value


@cache
def every_default() -> dict[str, Any]:
    """Each spec field's default, as model_dump(mode="json") writes it (not the required)."""
    return {
        n: json.loads(json.dumps(f.get_default(call_default_factory=True)))
        for n, f in knobs().items()
        if not f.is_required()
    }


@cache
def defaults() -> dict[str, Any]:
    """Each knob's default that the table's columns do not show (cells.differing's knobs)."""
    return {n: v for n, v in every_default().items() if n not in SHOWN}


def knobs_of(spec: RunSpec) -> dict[str, Any]:
    """The spec's knobs (the fields `cells.differing` may name) that are not at their default,
    as model_dump(mode="json") writes them."""
    dump = spec_dump(spec)
    return {n: dump[n] for n, default in defaults().items() if n in dump and dump[n] != default}


def of(result: Result) -> Listing:
    spec, m = result.spec, result.metrics
    scenario = scenarios.get(spec.scenario)
    measured = result.status in MEASURED
    own = validity.verdict(result) if measured else []
    found = result.headline
    throughput = "" if found is None else f"{rate_text(found.value)} {found.unit}"

    def named(_: RunSpec) -> str:
        return NAME

    tokens = m is not None and m.tokens_per_item and tokens_per_item(spec)
    scaled = scaling.scale(result)
    cell = cell_hash(result)
    name, words, config, knob_values, changes = _spec_texts(spec)
    fingerprint, software = _env_texts(result.env)
    return Listing(
        key=result.key,
        version=VERSION,
        platform=result.platform,
        status=result.status,
        scenario=spec.scenario,
        label=name,
        words=words,
        repeat=spec.repeat,
        config=config,
        knobs=knob_values,
        replicas=spec.replicas,
        batch_size=spec.batch_size,
        items_per_s=result.items_per_s,
        cells=(
            last_epoch_text(result),
            f"({throughput})" if shown_invalid(result) and throughput else throughput,
            ci_text(result),
            mfu_text(result),
            wait_text(result),
        ),
        metrics=m is not None,
        flags=tuple(dict.fromkeys(str(flag) for flag, _ in own)),
        target_pct=spec.ci_pct or validity.NOISY_PCT,
        reasons=tuple(f"{NAME}: {flag}: {why}" for flag, why in own)
        if measured
        else (f"{NAME}: {result.status}: {result.reason}",),
        lines=(  # tuples, as a stored listing reads back
            (tokens_line(result, named),) if tokens else (),
            (rank_line(result, named),) if m and m.ranks else (),
            tuple(scenario.lines(result, named)) if m else (),
        ),
        cell=cell,
        alone=scaled.alone,
        base=scaled.base,
        eager=cell_hash(result, compile=False) if spec.compile else cell,
        threads=scaled.threads,
        compiled=spec.compile,
        first_step_ms=m.first_step_ms if m else None,
        steady_ms=m.step_ms_steady.median if m else None,
        peak_source=m.flops.peak_source if m and m.flops else None,
        whole=scenario.read_whole and m is not None and m.record is not None,
        latency=(s.median, s.p99, s.n)
        if m and result.status == "ok" and scenario.batch_latency and (s := m.step_ms_steady)
        else None,
        unit=m.item_unit if m else "items",
        batchless=cell_hash(result, ignore=("batch_size",)),
        hostname=result.env.hostname,
        fleet_cell=cell_hash(result, platform=False),
        fleet_counted=fleet.counts(result.status, result.items_per_s, [f for f, _ in own]),
        roles=tuple((r.figure, r.group, r.kind.name, r.x, r.config) for r in roles(result)),
        interval=None if found is None or found.interval is None else tuple(found.interval),
        spec=changes,
        fingerprint=fingerprint,
        software=software,
    )


@kept
def _spec_texts(spec: RunSpec) -> tuple[str, str, str, dict[str, Any], str]:
    """What a listing keeps of its spec alone: its label, words, configuration, knobs and
    changed fields (made once for the records that share a spec: an import's)."""
    config = configuration(spec, batch=False, replicas=False)
    return label(spec), describe(spec), config, knobs_of(spec), changed_text(spec)


@kept
def _env_texts(env: Environment) -> tuple[str, str]:
    """What a listing keeps of its environment alone: its fingerprint and software."""
    return sorted_json(env.fingerprint()), sorted_json(secrets.masked(env.software()))


def changed(spec: RunSpec) -> dict[str, Any]:
    """The spec's fields, as model_dump(mode="json") writes them, that are not at their
    default, and its scenario: what a listing keeps of it (whole() gives the dump back)."""
    every = every_default()
    dump = spec_dump(spec)
    return {n: v for n, v in dump.items() if n == "scenario" or n not in every or every[n] != v}


def changed_text(spec: RunSpec) -> str:
    """changed() as the listing and the CSV's spool keep it."""
    return sorted_json(changed(spec))


def whole(changed: dict[str, Any]) -> dict[str, Any]:
    """The dump of the spec that changed() was given."""
    return dumped_defaults(changed["scenario"]) | changed


@cache
def dumped_defaults(scenario: str) -> dict[str, Any]:
    """The defaults a spec of this scenario dumps: those of the fields every cell shares and of
    its scenario's own settings (not another scenario's)."""
    own = scenarios.get(scenario).settings.model_fields
    return {n: v for n, v in every_default().items() if n in RunSpec.model_fields or n in own}


def tokens_per_item(spec: RunSpec) -> bool:
    """Whether a result's tokens are its items' (not a generation's new tokens, which its own
    lines give, nor a server's)."""
    scenario = scenarios.get(spec.scenario)
    return not (scenario.generates or isinstance(scenario, scenarios.ClientScenario))


def tokens_line(result: Result, name: Callable[[RunSpec], str] = describe) -> str:
    """A language model's throughput in tokens, both MFUs, what each device achieved, and the
    weights and optimizer state per rank under its layout."""
    m = result.metrics
    assert m is not None and m.tokens_per_s is not None
    devices = result.num_devices
    parts = [
        f"{rate_text(m.tokens_per_s)} tokens/s ({rate_text(m.tokens_per_s / devices)} per device)"
    ]
    if m.mfu is not None or m.mfu_analytic is not None:
        counted = "-" if m.mfu is None else f"{100 * m.mfu:.1f}%"
        analytic = "-" if m.mfu_analytic is None else f"{100 * m.mfu_analytic:.1f}%"
        share = m.flops.active_share if m.flops else None
        active = f" (N active: {share:.3g} of the experts' weights)" if share else ""
        parts.append(f"MFU {counted} counted, {analytic} by 6N + attention{active}")
    if m.tflops_per_device is not None:
        parts.append(f"{m.tflops_per_device:.3g} TFLOP/s per device")
    if m.state_gib is not None:
        where = "" if m.layout == "none" else f" per rank ({m.layout})"
        parts.append(f"weights and optimizer state {m.state_gib:.3g} GiB{where}")
    if m.expert_load:
        loads = sorted(m.expert_load)
        parts.append(
            f"busiest expert {statistics.median(loads):.2f}x an even share (median of "
            f"{len(loads)} MoE layers; worst {loads[-1]:.2f}x)"
        )
    if result.spec.lora_rank is not None and m.trainable_params is not None:
        parts.append(
            f"LoRA rank {result.spec.lora_rank}: {m.trainable_params:,} trainable weights; "
            "MFU counted only (the frozen weights take no gradient: no 6N)"
        )
    return f"{name(result.spec)}: " + "; ".join(parts)


def rank_line(result: Result, name: Callable[[RunSpec], str] = describe) -> str:
    """Each replica's own throughput and where it ran, for a data-parallel result."""
    assert result.metrics is not None
    ranks = result.metrics.ranks
    slowest = min(ranks, key=lambda k: k.items_per_s)
    places = ", ".join(
        f"{k.hostname}/NUMA {'several' if k.numa_node is None else k.numa_node}" for k in ranks
    )
    first = ranks[0].first_steady_step
    window = "" if first is None else f" over the headline's steady steps ({first + 1} on)"
    return (
        f"{name(result.spec)}: per rank {' '.join(rate_text(k.items_per_s) for k in ranks)} "
        f"{result.metrics.item_unit}/s{window} (slowest: rank {slowest.rank}); placed on {places}"
    )
