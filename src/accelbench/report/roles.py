"""The parts a result may take in the report's figures (report.figures: each drawer's own rules),
worked out once when its listing is made and kept with it, so that the figures choose what to
draw from the listings (report.plotted) and read only the records they draw."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from accelbench import scenarios
from accelbench.records.result import MEASURED, Result
from accelbench.report.cells import configuration
from accelbench.report.figures import PANELS


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
    scenario = scenarios.get(spec.scenario)
    views = scenario.views
    own = scenario.figures if r.metrics and r.metrics.record is not None else ()
    out = []
    if "batch" in views and r.status == "oom":
        out.append(Role("batch", (workload, spec.scenario), Kind.ONE, spec.batch_size))
    out += [Role(f.name, workload, Kind.WHOLE) for f in own if f.any_status]
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
    if "latency" in views and scenario.batch_latency:
        median("latency", workload, spec.batch_size)
    for figure in own:
        if figure.per_batch:
            median(figure.name, workload, spec.batch_size)
        elif not figure.any_status:
            out.append(Role(figure.name, workload, Kind.WHOLE, 0, line))
    if "efficiency" in views:
        for name, value in PANELS:
            if value(r) is not None:
                median(f"efficiency/{name}", workload, spec.batch_size)
    return out
