"""Which results the report's figures draw, chosen from their listings, each a Point of a few
fields (report.roles, kept with the listing): a site database's figures then read only the
records they draw.

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
from collections import ChainMap, defaultdict, deque
from collections.abc import Iterable

from accelbench.records.result import Result
from accelbench.report.cells import differing_values, knobs_text
from accelbench.report.drawing import median_pick
from accelbench.report.figures import MAX_EPOCH_BARS
from accelbench.report.listing import defaults
from accelbench.report.roles import Kind, Point, Role
from accelbench.report.sections import Source


def chosen(drawn: Iterable[Point | None]) -> dict[str, list[str]]:
    """Per figure (figures.DRAWERS' names, and efficiency/PANEL), the keys of the results whose
    points are `drawn` (oldest first; each listing's plot_point) that it draws or
    counts, oldest first."""
    points = [p for p in drawn if p is not None]
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


def read(source: Source) -> dict[str, list[Result]]:
    """Each figure's own records, chosen from the source's listings by their verdicts in the
    listing (the table's: Rows.verdicts) and read from it once."""
    verdicts = source.rows.verdicts
    each = chosen(row.plot_point(verdicts[row.key]) for row in source.rows.rows)
    found = {r.key: r for r in source.records(list(dict.fromkeys(itertools.chain(*each.values()))))}
    return {name: [found[k] for k in keys] for name, keys in each.items()}


def _picked(members: list[tuple[Point, Role]]) -> set[str]:
    """The keys one figure's group keeps: its whole results, and on each line the median pick of
    each x with the flagged repeats passed over for it."""
    known = defaults()
    # Each distinct knobs once: read-back listings share them (listing._ALL_KNOBS), and a
    # site's group of 100k points has a few.
    distinct = {id(p.knobs): p.knobs for p, _ in members}
    knobs = differing_values(known, distinct.values(), known)
    texts = {i: knobs_text(ChainMap(k, known), knobs) for i, k in distinct.items()}
    lines: dict[tuple[str, float], list[Point]] = defaultdict(list)
    keep = set()
    for p, role in members:
        if role.kind is Kind.WHOLE:
            keep.add(p.key)
            continue
        text = texts[id(p.knobs)]
        name = f"{p.platform} {' '.join(filter(None, [role.config, text]))}"
        lines[name, role.x].append(p)
    for line in lines.values():
        pick, passed = median_pick(line, lambda p: p.verdict, lambda p: p.items_per_s)
        keep.add(pick.key)
        keep.update(p.key for p in passed)
    return keep
