"""What a report is made from: the results table's listings, and the few whole records that its
other tables read (the seed paper's Tables 1 and 3, time to train, the ceilings, the fleet, the
platforms), chosen from each result's indexed columns (a Brief) before any record is read.

A site database's report then holds its listings and those records, not every record: a table
that needs several device counts, several hosts or a micro benchmark beside a model reads only
the results of groups that have them. The choice may take more than a table uses (the table
applies its own rules to what it is given), never less."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from accelbench import scenarios
from accelbench.analysis import fleet
from accelbench.analysis.fleet import FleetCell
from accelbench.analysis.roofline import CEILINGS
from accelbench.records.result import MEASURED, Result
from accelbench.report.results import Records, Rows, listed
from accelbench.storage.schema import Brief, brief


@dataclass(frozen=True)
class Source:
    """A report's inputs."""

    rows: Rows
    records: Records
    detail: Sequence[Result]
    """The whole records that the tables after the first read (wanted())."""
    platforms: Sequence[tuple[Result, int]]
    """The first result of each platform and host, and how many results they have."""
    fleet: Sequence[FleetCell]
    """The cells that several nodes of a platform ran (analysis.fleet), from their records read
    a batch at a time: at a site that is every record, which none holds at once."""
    made: Mapping[str, str]
    """When each result was stored (ISO 8601), by key: its place in a cell's history."""

    @classmethod
    def held(cls, results: Sequence[Result]) -> Source:
        """Results held in memory: every record is at hand."""
        rows, records = listed(results)
        firsts = first_of_each([brief(r) for r in results])
        by_key = {r.key: r for r in results}
        platforms = [(by_key[k], n) for k, n in firsts]
        made = {r.key: r.created_at.isoformat() for r in results}
        return cls(rows, records, results, platforms, fleet.cells(results), made)

    @classmethod
    def stored(cls, rows: Rows, briefs: Sequence[Brief], records: Records) -> Source:
        """Results in a database: the records that wanted() and the platforms name, read; the
        fleet judged from the listings, reading a record for each cell's name only."""
        firsts = first_of_each(briefs)
        keys = wanted(briefs)
        read = {r.key: r for r in records(list(dict.fromkeys([*keys, *(k for k, _ in firsts)])))}
        cells = fleet.judged((row.fleet_point for row in rows.rows), records)
        platforms = [(read[k], n) for k, n in firsts]
        made = {b.key: b.created_at for b in briefs}
        return cls(rows, records, [read[k] for k in keys], platforms, cells, made)


def first_of_each(briefs: Iterable[Brief]) -> list[tuple[str, int]]:
    """The key of the first result of each platform and host, and the results they have."""
    firsts: dict[tuple[str, str], str] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for b in briefs:
        firsts.setdefault((b.platform, b.hostname), b.key)
        counts[b.platform, b.hostname] += 1
    return [(key, counts[where]) for where, key in firsts.items()]


def wanted(briefs: Sequence[Brief]) -> list[str]:
    """The keys, in order, of the results that some table after the first may read."""
    measured = [b for b in briefs if b.status in MEASURED]
    chosen: set[str] = set()
    for view, group, spans in (  # Table 1: device counts; Table 3: batch sizes and counts
        ("table-1", _table_1, (_devices,)),
        ("table-3", _table_3, (_devices, _batches)),
    ):
        shown = scenarios.in_view(view)
        chosen |= _spanning([b for b in measured if b.scenario in shown], group, spans)
    whole = {s.name for s in scenarios.all_scenarios() if s.read_whole}
    chosen |= {b.key for b in measured if b.scenario in whole}
    chosen |= set(for_roofline(briefs))
    return [b.key for b in briefs if b.key in chosen]


def for_roofline(briefs: Sequence[Brief]) -> list[str]:
    """The keys of the results measured where a ceiling was (a matmul or a loader on the same
    platform and host): the only ones with a ceiling to reach (analysis.roofline)."""
    ok = [b for b in briefs if b.status == "ok"]
    inputs = scenarios.in_view("input-ceiling")
    roofed = {
        (b.platform, b.hostname) for b in ok if b.workload in CEILINGS or b.scenario in inputs
    }
    return [b.key for b in ok if (b.platform, b.hostname) in roofed]


def _spanning(
    briefs: Sequence[Brief],
    group: Callable[[Brief], tuple[object, ...]],
    spans: Sequence[Callable[[Brief], object]],
) -> set[str]:
    """The keys of the groups that hold two or more values of each span."""
    groups: dict[tuple[object, ...], list[Brief]] = defaultdict(list)
    for b in briefs:
        groups[group(b)].append(b)
    return {
        b.key
        for members in groups.values()
        if all(len({span(m) for m in members}) >= 2 for span in spans)
        for b in members
    }


def _table_1(b: Brief) -> tuple[object, ...]:
    return b.workload, b.platform, b.micro_batch, b.precision


def _table_3(b: Brief) -> tuple[object, ...]:
    return b.workload, b.platform, b.precision


def _devices(b: Brief) -> object:
    return b.num_devices


def _batches(b: Brief) -> object:
    return b.micro_batch
