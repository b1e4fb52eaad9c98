"""Results read from several databases at once (a site's, a cluster's, imported files'),
merged by time, each result once (report.database reads their listings so)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from accelbench.records.result import Result
from accelbench.storage.store import Store

S = TypeVar("S", bound=Store)
T = TypeVar("T")


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
        stores = open_all(stack, wheres, Store)
        yield from _results(stores, workload, platform, status)


def texts_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    status: str | None = None,
) -> Iterator[str]:
    """stream_all's results as their JSON as stored (Store.stream_texts): what an export
    copies, no record read where a database's schema is this accelbench's."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, Store)
        streams = (
            s.stream_texts(workload=workload, platform=platform, status=status) for s in stores
        )
        yield from (text for _, _, text in merged(streams, lambda row: row[0], lambda row: row[1]))


def open_all(
    stack: ExitStack, wheres: Sequence[Path | str] | None, kind: Callable[..., S]
) -> list[S]:
    """Each database opened read-only as a `kind`, closed with `stack` (None: the default
    one)."""
    stores = []
    for where in [*wheres] if wheres else [None]:
        stores.append(store := kind(where, writable=False))
        stack.callback(store.close)
    return stores


def _results(
    stores: Sequence[Store], workload: str | None, platform: str | None, status: str | None
) -> Iterator[Result]:
    """The stores' results merged by time, each key once."""
    streams = (s.stream(workload=workload, platform=platform, status=status) for s in stores)
    return merged(streams, lambda r: r.created_at, lambda r: r.key)


def merged(
    streams: Iterable[Iterator[T]], when: Callable[[T], Any], key: Callable[[T], str]
) -> Iterator[T]:
    """Streams each in time order, merged by time, each key once (the first database's). One
    stream is passed through: a database holds a key once, so no key is kept (a JSON Lines
    export of a site's million results peaked at 170 MB with them, 62 MB without)."""
    streams = list(streams)
    if len(streams) == 1:
        yield from streams[0]
        return
    seen: set[str] = set()
    for item in heapq.merge(*streams, key=when):
        if (found := key(item)) not in seen:
            seen.add(found)
            yield item


def query_all(
    wheres: Sequence[Path | str] | None,
    *,
    workload: str | None = None,
    platform: str | None = None,
    status: str | None = None,
) -> tuple[list[Result], list[str]]:
    """stream_all's results in a list, and where they came from."""
    with ExitStack() as stack:
        stores = open_all(stack, wheres, Store)
        return list(_results(stores, workload, platform, status)), [s.where for s in stores]
