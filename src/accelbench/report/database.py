"""The results database as accelbench's commands open it: the store (storage.store) with each
result's listing (report.listing) made as it is stored and read back for the results table, so
that listing a site's results reads no record; and several databases read as a report reads
them (report.sections.Source: listings, and only the records its later tables need)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from accelbench import secrets
from accelbench.analysis import comparison, fleet, validity
from accelbench.analysis.scaling import Scale
from accelbench.records.result import Result
from accelbench.records.spec import STORED, RunSpec
from accelbench.report import listing, tabular
from accelbench.report.listing import Listing
from accelbench.report.results import Records, Rows
from accelbench.report.sections import Source
from accelbench.storage.schema import Brief, decoded
from accelbench.storage.several import merged, open_all
from accelbench.storage.store import Store


def stored_texts(result: Result) -> tuple[str, str]:
    """The result's listing and flat row as stored, without any secret."""
    return secrets.scrub(listing.of(result).dumps()), tabular.flat_text(result)


class ResultStore(Store):
    """Stored results, in an SQLite file or a PostgreSQL database, each with its listing."""

    def __init__(self, where: Path | str | None = None, *, writable: bool = True) -> None:
        super().__init__(where, writable=writable, lister=stored_texts)

    def listings(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[Listing]:
        """query()'s results as the results table shows them, without reading their records
        (but for a row whose listing older code made, or none: made again from its record)."""
        texts = self.listing_texts(workload=workload, platform=platform, status=status, limit=limit)
        with uncollected():
            return [self._listed(key, text) for key, text in texts]

    def briefs_listed(
        self, *, workload: str | None = None, platform: str | None = None, status: str | None = None
    ) -> list[tuple[Brief, Listing]]:
        """briefs() with each result's listing, as listings() makes it, in one read of the
        table."""
        texts = self.brief_texts(workload=workload, platform=platform, status=status)
        with uncollected():
            return [(brief, self._listed(brief.key, text)) for brief, text in texts]

    def _listed(self, key: str, text: str | None) -> Listing:
        """The stored listing; made again from its record where older code made it, or none."""
        made = None if text is None else Listing.loads(text)
        return made if made is not None else listing.of(self.records([key])[0])

    def flats(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> Iterator[tuple[str, str, tabular.Flat]]:
        """query()'s results as (created_at, key, what its CSV row needs), from its stored flat
        row and listing: no record read, but where older code made them, or none did."""
        filters: dict[str, Any] = {"workload": workload, "platform": platform, "status": status}
        at = listing.positions(_FLAT)
        rows = self.listed(**filters, listing_at=at, flat=True, limit=limit)
        if rows is None:  # of another schema: its records say
            records = self.query(**filters, limit=limit) if limit else self.stream(**filters)
            yield from ((r.created_at.isoformat(), r.key, tabular.flat_of(r)) for r in records)
            return
        for made, key, text, flat in rows:
            items = listing.items(text)
            if items is None or flat is None:
                yield made, key, tabular.flat_of(self.records([key])[0])
                continue
            *scale, spec = items
            yield made, key, tabular.Flat(flat, Scale(*scale), spec)


_FLAT = ("alone", "base", "replicas", "items_per_s", "status", "threads", "spec")
"""What a CSV row takes from the listing: its scaling.Scale, in order, and its spec."""


@contextmanager
def uncollected() -> Iterator[None]:
    """The cyclic garbage collector off within the block (as it was after): what is read from a
    database (listings, briefs, points) holds no cycle, and each full pass walks all of it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def flats_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    status: str | None = None,
) -> Iterator[tabular.Flat]:
    """Several databases' ResultStore.flats, oldest first, each key once."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, ResultStore)
        found = (s.flats(workload=workload, platform=platform, status=status) for s in stores)
        yield from (f for _, _, f in merged(found, lambda row: row[0], lambda row: row[1]))


@contextmanager
def source_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    status: str | None = None,
) -> Iterator[tuple[Source, list[str]]]:
    """Several databases' results as a report reads them (report.sections.Source: listings,
    and only the records its later tables need), merged by time, each key once; and where
    they came from. The databases stay open inside the block, for the records a note reads."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, ResultStore)
        found, records = _briefed(stores, (workload, platform, status), listed=True)
        rows = Rows([row for _, row in found if row is not None])
        yield Source.stored(rows, [b for b, _ in found], records), [s.where for s in stores]


def chosen_all(
    wheres: Sequence[Path | str] | None,
    choose: Callable[[Sequence[Brief]], Sequence[str]],
    *,
    workload: str | None = None,
    platform: str | None = None,
) -> tuple[list[Result], int]:
    """The results that `choose` picks (report.sections) from several databases' indexed
    columns, oldest first, each key once, with no other record read; and how many matched."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, ResultStore)
        found, records = _briefed(stores, (workload, platform, None), listed=False)
        briefs = [b for b, _ in found]
        return list(records(choose(briefs))), len(briefs)


def _briefed(
    stores: Sequence[ResultStore], filters: tuple[str | None, str | None, str | None], listed: bool
) -> tuple[list[tuple[Brief, Listing | None]], Records]:
    """The stores' briefs (with their listings if `listed`) merged by time, each key once; and
    a reader of the records of keys among them."""
    owner: dict[str, ResultStore] = {}
    found: list[tuple[Brief, Listing | None]] = []
    workload, platform, status = filters
    for store in stores:
        pairs: Sequence[tuple[Brief, Listing | None]]
        if listed:  # one read of the table, not one for the briefs and one for the listings
            pairs = store.briefs_listed(workload=workload, platform=platform, status=status)
        else:
            pairs = [
                (b, None) for b in store.briefs(workload=workload, platform=platform, status=status)
            ]
        for b, row in pairs:
            if b.key not in owner:
                owner[b.key] = store
                found.append((b, row))
    found.sort(key=lambda pair: pair[0].created_at)  # stable: each database's order kept

    def records(keys: Sequence[str]) -> list[Result]:
        by_key = {}
        for store in stores:
            mine = [k for k in keys if owner[k] is store]
            by_key.update({r.key: r for r in store.records(mine)} if mine else {})
        return [by_key[k] for k in keys]

    return found, records


def projected(
    stores: Sequence[ResultStore],
    names: Sequence[str],
    filters: tuple[str | None, str | None, str | None],
) -> Iterator[tuple[str, str, list[Any]]]:
    """(created_at, key, these fields of its listing) of the stores' results (workload,
    platform, status), oldest first, each key once: the database takes the fields out of each
    stored listing, so none is made (the fleet's five fields at 100k: 0.38x the CPU time);
    a database of another schema, or a row whose listing other code made, from its record."""
    streams = (_projected(store, names, filters) for store in stores)
    return merged(streams, lambda row: row[0], lambda row: row[1])


def _projected(
    store: ResultStore, names: Sequence[str], filters: tuple[str | None, str | None, str | None]
) -> Iterator[tuple[str, str, list[Any]]]:
    workload, platform, status = filters
    at = listing.positions(names)
    rows = store.listed(workload=workload, platform=platform, status=status, listing_at=at)
    if rows is None:  # of another schema: its records say
        for result in store.stream(workload=workload, platform=platform, status=status):
            yield result.created_at.isoformat(), result.key, _fields(listing.of(result), names)
        return
    for made, key, text in rows:
        found = listing.items(text)
        if found is None:  # made by other code
            found = _fields(listing.of(store.records([key])[0]), names)
        yield made, key, found


def _fields(made: Listing, names: Sequence[str]) -> list[Any]:
    return [getattr(made, name) for name in names]


def records_of(stores: Sequence[ResultStore], keys: Sequence[str]) -> list[Result]:
    """The results of these keys, in their order, from whichever store holds each."""
    found: dict[str, Result] = {}
    for store in stores:
        if missing := [k for k in keys if k not in found]:
            found |= store.held(missing)
    return [found[k] for k in keys]


def fleet_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
) -> list[fleet.FleetCell]:
    """analysis.fleet.judged of several databases' results, from the fields of their listings
    that the fleet reads (projected): no record read but one to name each cell judged."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, ResultStore)
        rows = projected(stores, listing.FLEET_POINT, (workload, platform, None))
        points = (listing.fleet_point(key, found) for _, key, found in rows)
        return fleet.judged(points, partial(records_of, stores))


def compared(
    wheres: Sequence[Path | str] | None,
    by: str,
    *,
    workload: str | None = None,
    platform: str | None = None,
) -> comparison.Cells:
    """comparison.group of several databases' ok results, each from the fields of its listing
    that compare matches and ranks on (projected): no record is read whole but the first of each
    configuration, which names it."""
    comparison.check_by(by)
    with ExitStack() as stack:
        stores = open_all(stack, wheres, ResultStore)
        rows = projected(stores, _COMPARED, (workload, platform, "ok"))
        return comparison.group(m for _, _, found in rows if (m := _measured(found, by)))


def _measured(found: Sequence[Any], by: str) -> comparison.Measured | None:
    """What comparing keeps of an ok result, from its listing's _COMPARED fields."""
    platform, rate, interval, flags, changed, fingerprint = found
    if not rate or rate <= 0:
        return None
    spec = listing.whole(decoded(changed))
    value = platform if by == "platform" else str(spec.get(by))
    matched = comparison.matched(spec, decoded(fingerprint), by)
    unranked = next((f for f in flags if f in _UNRANKED), None)
    point = (rate, (interval[0], interval[1]) if interval else None, unranked)
    return comparison.Measured(matched, value, point, partial(_named, spec, platform))


def _named(spec: dict[str, Any], platform: str) -> comparison.Named:
    """What names a configuration, its spec validated (only the first run's of each)."""
    return comparison.Named(RunSpec.model_validate(spec, context=STORED), platform)


_COMPARED = ("platform", "items_per_s", "interval", "flags", "spec", "fingerprint")
_UNRANKED = frozenset(str(flag) for flag in validity.UNRANKED)
