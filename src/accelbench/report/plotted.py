"""Which results the report's figures draw, chosen as the records stream past, each kept only as
a Point of a few fields: a site database's figures then read every record once and hold the
records they draw, not every record.

Most figures draw one result per line and x: the median repeat (drawing.median_by_x). The lines
are named as figures name them (the platform, the configuration less the axis, and the knobs
that differ among the figure's results), the median is picked as there (drawing.median_pick),
and the flagged repeats passed over are kept too, for the caption's count. Drawn from what is
chosen here, every figure is the one drawn from all the results (tests compare the bytes): each
line and x keeps its one pick, and every knob that differs among a figure's results still
differs among its picks (two values of a knob name two lines, and each line keeps a point).

Each figure is drawn from its own choice (a result another figure keeps would be one more
repeat in its median), the efficiency figure's panels each from theirs. Kept whole, as the
figures draw them whole: server and serving runs (a line of trials each), time-to-train runs
(their seeds are pooled) and the last MAX_EPOCH_BARS of first-epoch bars."""

from __future__ import annotations

import itertools
import sys
from collections import ChainMap, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from accelbench import scenarios
from accelbench.analysis import validity
from accelbench.records.result import MEASURED, Result
from accelbench.report.cells import configuration, differing_values, knobs_text
from accelbench.report.drawing import median_pick
from accelbench.report.figures import MAX_EPOCH_BARS, PANELS
from accelbench.report.listing import defaults, knobs_of
from accelbench.report.sections import Source
from accelbench.scenarios.base import record_of
from accelbench.scenarios.generate import GenerateMetrics
from accelbench.scenarios.serve import ServeMetrics
from accelbench.scenarios.server import ServerMetrics
from accelbench.scenarios.time_to_train import TimeToTrain


class Kind(Enum):
    MEDIAN = "the median repeat of each line and x"
    WHOLE = "every such result (its line's name still counts its knobs)"
    ONE = "one result of each x (a marker, not a line)"
    LAST = "the latest MAX_EPOCH_BARS"


class Role(NamedTuple):
    """A part a result may take in a figure: which figure and group of results (the figure's
    lines are named over the group), its x, and its configuration() with the axes that the
    figure's line names leave out."""

    figure: str
    group: object
    kind: Kind
    x: float = 0
    config: str = ""


@dataclass(frozen=True, slots=True)
class Point:
    key: str
    platform: str
    items_per_s: float | None
    verdict: str
    knobs: dict[str, Any]
    roles: tuple[Role, ...]


def roles(r: Result) -> list[Role]:
    """The parts `r` may take in the figures (report.figures: each drawer's own rules)."""
    spec, workload = r.spec, r.spec.workload
    views = scenarios.get(spec.scenario).views
    out = []
    if "batch" in views and r.status == "oom":
        out.append(Role("batch", (workload, spec.scenario), Kind.ONE, spec.batch_size))
    if record_of(r, TimeToTrain):
        out.append(Role("time-to-train", workload, Kind.WHOLE))
    if r.status not in MEASURED or not r.metrics:
        return out
    line = sys.intern(configuration(spec, batch=False))  # drawing.series_name's axes

    def median(figure: str, group: object, x: float, config: str = line) -> None:
        out.append(Role(figure, group, Kind.MEDIAN, x, config))

    if "batch" in views:
        median("batch", (workload, spec.scenario), spec.batch_size)
    if "scaling" in views:
        median("scaling", workload, r.num_devices, sys.intern(configuration(spec, replicas=False)))
    if "first-epoch" in views and len(r.metrics.epochs) > 1:
        out.append(Role("first-epoch", None, Kind.LAST))
    if "latency" in views and scenarios.get(spec.scenario).batch_latency:
        median("latency", workload, spec.batch_size)
    if "latency" in views and record_of(r, ServerMetrics):
        out.append(Role("latency", workload, Kind.WHOLE, 0, line))
    if "tokens" in views and record_of(r, GenerateMetrics):
        median("generation", workload, spec.batch_size)
    if "serving" in views and record_of(r, ServeMetrics):
        out.append(Role("serving", workload, Kind.WHOLE, 0, line))
    if "efficiency" in views:
        for name, value in PANELS:
            if value(r) is not None:
                median(f"efficiency/{name}", workload, spec.batch_size)
    return out


def point(r: Result) -> Point | None:
    """What choosing needs of `r`; None if no figure draws it."""
    found = roles(r)
    if not found:
        return None
    verdict = validity.verdict_text(r) if r.status in MEASURED else r.status
    return Point(r.key, r.platform, r.items_per_s, sys.intern(verdict), knobs_of(r.spec), (*found,))


def chosen(results: Iterable[Result]) -> dict[str, list[str]]:
    """Per figure (figures.DRAWERS' names, and efficiency/PANEL), the keys of the results of
    `results` (oldest first) that it draws or counts, oldest first."""
    points = [p for r in results if (p := point(r))]
    keep: dict[str, set[str]] = defaultdict(set)
    groups: dict[tuple[str, object], list[tuple[Point, Role]]] = defaultdict(list)
    ones: dict[tuple[str, object, float], str] = {}
    last: dict[str, deque[str]] = defaultdict(lambda: deque(maxlen=MAX_EPOCH_BARS))
    for p in points:
        for role in p.roles:
            if role.kind is Kind.ONE:
                ones.setdefault((role.figure, role.group, role.x), p.key)
            elif role.kind is Kind.LAST:
                last[role.figure].append(p.key)
            else:
                groups[role.figure, role.group].append((p, role))
    for (figure, *_), key in ones.items():
        keep[figure].add(key)
    for figure, latest in last.items():
        keep[figure].update(latest)
    for (figure, _), members in groups.items():
        keep[figure] |= _picked(members)
    return {figure: [p.key for p in points if p.key in kept] for figure, kept in keep.items()}


def read(source: Source, results: Iterable[Result]) -> dict[str, list[Result]]:
    """Each figure's own records (chosen() from `results`, the source's results streamed), read
    from the source once; a result stored since its listings were read waits for the next
    report."""
    listed = {row.key for row in source.rows.rows}
    each = {name: [k for k in keys if k in listed] for name, keys in chosen(results).items()}
    found = {r.key: r for r in source.records(list(dict.fromkeys(itertools.chain(*each.values()))))}
    return {name: [found[k] for k in keys] for name, keys in each.items()}


def _picked(members: list[tuple[Point, Role]]) -> set[str]:
    """The keys one figure's group keeps: its whole results, and on each line the median pick of
    each x with the flagged repeats passed over for it."""
    known = defaults()
    knobs = differing_values(known, (p.knobs for p, _ in members), known)
    lines: dict[tuple[str, float], list[Point]] = defaultdict(list)
    keep = set()
    for p, role in members:
        if role.kind is Kind.WHOLE:
            keep.add(p.key)
            continue
        text = knobs_text(ChainMap(p.knobs, known), knobs)
        name = f"{p.platform} {' '.join(filter(None, [role.config, text]))}"
        lines[name, role.x].append(p)
    for line in lines.values():
        pick, passed = median_pick(line, lambda p: p.verdict, lambda p: p.items_per_s)
        keep.add(pick.key)
        keep.update(p.key for p in passed)
    return keep
