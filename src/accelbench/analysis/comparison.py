"""Ratios between configurations at matched conditions: `accelbench compare --by platform` (or
precision, or any spec field) sets each value's throughput against a baseline's (given, or
else the natural one in each cell: fp32, one device, the smallest batch) for every cell that was
run at both, all else equal; the configurations that could not be matched are said, with why.

A ratio carries an interval: the lowest and the highest ratio the two throughputs' 95% intervals
allow (repeats of a cell widen its interval to cover all of them). Two configurations are ranked
only when that interval excludes 1, that is when their intervals do not overlap; a result
without an interval (too few steady steps, a server's sustained rate) or measured while other
work shared its host (contended) is never ranked.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Any, NamedTuple

from accelbench.analysis import validity
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result, cell_key, cell_of
from accelbench.records.spec import RunSpec, knobs

NOT_MATCHED = ("repeat", "seed")
"""Spec fields that never separate cells being compared: repeats and seeds pool together."""


def fields() -> list[str]:
    """What `--by` accepts: the platform (the spec's own `platform` label is part of it), or a
    spec field."""
    return list(dict.fromkeys(["platform", *(f for f in knobs() if f not in NOT_MATCHED)]))


@dataclass(frozen=True)
class Band:
    """The throughput of one configuration in one cell: the median over its repeats, and an
    interval covering each repeat's 95% interval (None where one has no interval)."""

    median: float
    low: float | None
    high: float | None
    num_runs: int
    unranked: str | None = None
    """The flag of a run that keeps the band from being ranked (validity.UNRANKED: another
    process shared its platform, or its rate drifted); None if there is none."""


def band(runs: Sequence[Result]) -> Band:
    """The runs' throughputs pooled: their median, and the span of their 95% intervals."""
    return band_of([(r.items_per_s, r.items_per_s_ci, validity.unranked(r)) for r in runs])


def band_of(runs: Sequence[tuple[float | None, tuple[float, float] | None, str | None]]) -> Band:
    """band() of (throughput, its 95% interval, the flag that keeps it unranked) per run."""
    rated = [(rate, ci, flag) for rate, ci, flag in runs if rate is not None]
    median = statistics.median(rate for rate, _, _ in rated)
    unranked = next((flag for _, _, flag in rated if flag), None)
    intervals = [ci for _, ci, _ in rated]
    if any(ci is None for ci in intervals):
        return Band(median, None, None, len(rated), unranked)
    lows = [ci[0] for ci in intervals if ci]
    highs = [ci[1] for ci in intervals if ci]
    return Band(median, min(lows), max(highs), len(rated), unranked)


class Ranking(StrEnum):
    """What a ratio's interval allows: the value ranked faster or slower than the baseline, or
    not ranked, and why."""

    FASTER = "faster"
    SLOWER = "slower"
    OVERLAP = "overlap"
    NO_INTERVAL = "no-interval"
    CONTENDED = "contended"
    DRIFTING = "drifting"

    @property
    def ranked(self) -> bool:
        return self in (Ranking.FASTER, Ranking.SLOWER)


@dataclass(frozen=True)
class Ratio:
    cell: Named
    """The baseline's first run, which names the cell."""
    value: str
    baseline: str
    measured: Band
    reference: Band

    @property
    def ratio(self) -> float:
        return self.measured.median / self.reference.median

    @property
    def interval(self) -> tuple[float, float] | None:
        a, b = self.measured, self.reference
        if a.low is None or a.high is None or b.low is None or b.high is None or b.low <= 0:
            return None
        return a.low / b.high, a.high / b.low

    @property
    def ranking(self) -> Ranking:
        interval = self.interval
        if flag := self.measured.unranked or self.reference.unranked:
            return Ranking(flag)
        if interval is None:
            return Ranking.NO_INTERVAL
        if interval[0] > 1:
            return Ranking.FASTER
        if interval[1] < 1:
            return Ranking.SLOWER
        return Ranking.OVERLAP


class Named(NamedTuple):
    """What names a configuration: the spec and platform of its first run."""

    spec: RunSpec
    platform: str


def value_of(result: Result | Named, by: str) -> str:
    return result.platform if by == "platform" else str(result.spec.knob(by))


def _matched(result: Result, by: str) -> str:
    """The conditions that must agree: everything but `by` (and repeat and seed)."""
    return cell_key(result, ignore=(by, *NOT_MATCHED), platform=by != "platform")


def matched(spec: dict[str, Any], fingerprint: dict[str, object], by: str) -> str:
    """_matched of a spec as model_dump(mode="json") writes it and its environment's
    fingerprint, as a listing keeps them."""
    return cell_of(spec, fingerprint if by != "platform" else None, (by, *NOT_MATCHED))


def _order(by: str) -> Callable[[str], tuple[int, float, bool, str]]:
    """How values of `by` sort, the natural baseline first: numbers from the smallest (one
    device, the smallest batch); words from the spec's default (fp32, no compile), then A-Z."""
    field = knobs().get(by)
    default = None if field is None else str(field.default)

    def key(value: str) -> tuple[int, float, bool, str]:
        try:
            return 0, float(value), False, value
        except ValueError:
            return 1, 0.0, value != default, value

    return key


Point = tuple[float | None, tuple[float, float] | None, str | None]
"""What a band needs of a run (band_of): its throughput, its 95% interval, its unranked flag."""


@dataclass
class Runs:
    """The runs of one configuration in one cell, as comparing keeps them: the first, which
    names it (kept without its metrics, which only the points need), and each one's point."""

    first: Named
    points: list[Point]


Cells = dict[str, dict[str, Runs]]
"""Runs by matched conditions, then by their value of `by`."""


class Measured(NamedTuple):
    """What comparing keeps of a run: its conditions with `by` left out, its value of `by`, its
    point, and what names its configuration, made only for the first run of each."""

    matched: str
    value: str
    point: Point
    name: Callable[[], Named]


def measured(r: Result, by: str) -> Measured | None:
    """What comparing keeps of a result; None unless it is ok with a positive headline."""
    headline = r.headline if r.status == "ok" else None  # the scenario's rule: once
    if headline is None or headline.value <= 0:
        return None
    point = (headline.value, headline.interval, validity.unranked(r))
    return Measured(_matched(r, by), value_of(r, by), point, partial(Named, r.spec, r.platform))


def grouped(results: Iterable[Result], by: str) -> Cells:
    """The measured results by matched conditions, then by their value of `by`, in one pass
    that keeps each one's point and what names each configuration, not the results: a site's
    results can be streamed through."""
    check_by(by)
    return group(m for r in results if (m := measured(r, by)) is not None)


def group(items: Iterable[Measured]) -> Cells:
    """The runs by matched conditions, then by their value, in the order they come, each
    configuration named by its first run."""
    kept: dict[str, dict[str, tuple[Callable[[], Named], list[Point]]]] = defaultdict(dict)
    for m in items:
        cell = kept[m.matched]
        if (runs := cell.get(m.value)) is None:
            runs = cell[m.value] = (m.name, [])
        runs[1].append(m.point)
    return {
        matched: {value: Runs(name(), points) for value, (name, points) in cell.items()}
        for matched, cell in kept.items()
    }


def check_by(by: str) -> None:
    if by not in fields():
        raise AccelbenchError(f"cannot compare by {by!r}: give --by one of {', '.join(fields())}")


def _cells(found: Iterable[Result] | Cells, by: str) -> Cells:
    return found if isinstance(found, dict) else grouped(found, by)


def _check_baseline(cells: Cells, by: str, baseline: str) -> None:
    values = sorted({v for cell in cells.values() for v in cell}, key=_order(by))
    if baseline not in values:
        raise AccelbenchError(
            f"no stored result has {by} {baseline!r}: give --baseline one of {', '.join(values)}"
        )


def ratios(results: Iterable[Result] | Cells, by: str, baseline: str | None = None) -> list[Ratio]:
    """Every value of `by` against the baseline value in each cell that has both: `baseline`,
    or else each cell's first in the natural order (_order). Only results with status ok count.
    `results` may be grouped() already, for unmatched() to read too."""
    cells = _cells(results, by)
    if baseline is not None:
        _check_baseline(cells, by, baseline)
    order, out = _order(by), []
    for cell in cells.values():
        base = baseline or min(cell, key=order)
        if base in cell:
            reference = band_of(cell[base].points)
            out += [
                Ratio(cell[base].first, value, base, band_of(cell[value].points), reference)
                for value in sorted(cell, key=order)
                if value != base
            ]
    return out


@dataclass(frozen=True)
class Unmatched:
    """A configuration that was compared with nothing, and why."""

    result: Named
    """Its first run, which names it."""
    missing_baseline: str | None
    """The baseline it was not run at, when one was given."""
    nearest: tuple[tuple[str, str, str], ...]
    """Where the closest configuration run at another value of `by` differs: (field, its value
    here, there); empty with a missing baseline."""


def unmatched(
    results: Iterable[Result] | Cells, by: str, baseline: str | None = None
) -> list[Unmatched]:
    """The configurations `ratios` compares with nothing: run at one value of `by` only, or not
    at the given baseline. A run at 16 steps an epoch is no match for one at 13, whatever its
    batch, so the fields that keep it apart are said."""
    cells = _cells(results, by)
    if len({v for cell in cells.values() for v in cell}) < 2:
        return []  # nothing was run at two values: there is nothing to miss
    out = []
    for cell in cells.values():
        if baseline is not None and baseline not in cell:
            out += [Unmatched(runs.first, baseline, ()) for runs in cell.values()]
        elif len(cell) == 1:
            [(value, only)] = cell.items()
            first = only.first
            # Only a like cell (the workload in the same scenario) elsewhere is a near miss.
            like = (first.spec.workload, first.spec.scenario)
            elsewhere = [
                runs.first
                for c in cells.values()
                for v, runs in c.items()
                if v != value and (runs.first.spec.workload, runs.first.spec.scenario) == like
            ]
            if not elsewhere:
                continue
            nearest = min((_differences(first, o, by) for o in elsewhere), key=len)
            out.append(Unmatched(first, None, nearest))
    return out


def _differences(a: Named, b: Named, by: str) -> tuple[tuple[str, str, str], ...]:
    """The matched conditions on which two results differ: (field, a's value, b's)."""
    return tuple(
        (name, value_of(a, name), value_of(b, name))
        for name in fields()
        if name != by and value_of(a, name) != value_of(b, name)
    )


@dataclass(frozen=True)
class Summary:
    """One value against its baseline over every matched cell."""

    value: str
    baseline: str
    geomean: float | None
    """Geometric mean of the ratios of the ranked cells; None when none could be ranked, since
    ratios that their intervals cannot tell from 1 say nothing, however many are averaged."""
    num_matched: int
    num_faster: int
    num_slower: int
    num_level: int
    """The matched cells whose intervals overlap: level, as far as the runs can tell."""

    @property
    def num_ranked(self) -> int:
        return self.num_faster + self.num_slower


def summary(found: Sequence[Ratio]) -> list[Summary]:
    """Per value and baseline: how many matched cells could be ranked either way, and the
    geometric mean ratio over those."""
    groups: dict[tuple[str, str], list[Ratio]] = defaultdict(list)
    for r in found:
        groups[(r.value, r.baseline)].append(r)
    return [
        Summary(
            value=value,
            baseline=baseline,
            geomean=_geomean([r.ratio for r in members if r.ranking.ranked]),
            num_matched=len(members),
            num_faster=sum(r.ranking is Ranking.FASTER for r in members),
            num_slower=sum(r.ranking is Ranking.SLOWER for r in members),
            num_level=sum(r.ranking is Ranking.OVERLAP for r in members),
        )
        for (value, baseline), members in groups.items()
    ]


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(statistics.fmean(map(math.log, values))) if values else None
