"""Results read from several databases at once (a site's, a cluster's, imported files'),
merged by time, each result once."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from accelbench.records.result import Result
from accelbench.report.listing import Listing
from accelbench.report.results import Records, Rows
from accelbench.report.sections import Brief, Source
from accelbench.storage.store import ResultStore


def stream_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    status: str | None = None,
) -> Iterator[Result]:
    """Results from several databases (None: the default one), oldest first, a result in
    several counted once (by key), one at a time: each database read through its cursor and
    the streams merged by time, so memory holds a batch of each and the keys seen."""
    with ExitStack() as stack:
        stores = _open_all(stack, wheres)
        yield from _merged(stores, workload, platform, status)


def _open_all(stack: ExitStack, wheres: Sequence[Path | str] | None) -> list[ResultStore]:
    """Each database opened read-only, closed with `stack` (None: the default one)."""
    places: list[Path | str | None] = [*wheres] if wheres else [None]
    return [stack.enter_context(ResultStore(where, writable=False)) for where in places]


def _merged(
    stores: Sequence[ResultStore], workload: str | None, platform: str | None, status: str | None
) -> Iterator[Result]:
    """The stores' results merged by time, each key once."""
    seen: set[str] = set()
    streams = (s.stream(workload=workload, platform=platform, status=status) for s in stores)
    for result in heapq.merge(*streams, key=lambda r: r.created_at):
        if result.key not in seen:
            seen.add(result.key)
            yield result


def query_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    status: str | None = None,
) -> tuple[list[Result], list[str]]:
    """stream_all's results in a list, and where they came from."""
    with ExitStack() as stack:
        stores = _open_all(stack, wheres)
        return list(_merged(stores, workload, platform, status)), [s.where for s in stores]


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
        stores = _open_all(stack, wheres)
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
        stores = _open_all(stack, wheres)
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
        briefs = store.briefs(workload=workload, platform=platform, status=status)
        pairs: list[tuple[Brief, Listing | None]] = [(b, None) for b in briefs]
        if listed:
            rows = {
                row.key: row
                for row in store.listings(workload=workload, platform=platform, status=status)
            }
            pairs = [(b, rows[b.key]) for b in briefs if b.key in rows]
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
