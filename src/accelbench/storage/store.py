"""The results database: storing and querying results (schema.py holds the table's columns
and migrations, connect.py finds and opens the database; no other module knows SQL). The store
keeps what it is handed: each result's record, its indexed columns, and the text its opener's
lister makes of it (the results table's listing, report.database), which it never reads.

One wide table: indexed query columns for filtering, plus the full JSON record. Rows are keyed by
the result key (spec + platform), so storing a cell again replaces it instead of duplicating it.
Open it with sqlite3, pandas or Datasette: `SELECT workload, items_per_s FROM results`.

Two back ends, one schema: an SQLite file (the default), or a PostgreSQL server given by URL
(`postgresql://user@host/db`), where a site collects the results of all its clusters. The
schema version lives in PRAGMA user_version (SQLite) or the accelbench_schema table
(PostgreSQL); migrations run in order inside one transaction, after a copy of the results is
kept.
"""

from __future__ import annotations

import itertools
import json
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Self, TypeVar

from accelbench.errors import AccelbenchError, one_line
from accelbench.records.result import Result
from accelbench.storage import connect, schema
from accelbench.storage.schema import Brief, Lister, Row

log = logging.getLogger(__name__)
_CURSORS = itertools.count()
"""Numbers that name server-side cursors apart."""
_LOOKED_UP = 100
"""Results an import holds while it looks up which of their keys are stored (500 held 30 MB)."""
T = TypeVar("T")
RETRY_WAITS_S = (1.0, 4.0, 15.0)
"""Back-off between the tries of a write the database refused for a while (a lock held past
SQLite's 30 s busy timeout, a PostgreSQL server restarting)."""


_MIGRATION_LOCK = 0x61636362  # PostgreSQL advisory lock: one migrating process at a time


def _items(text: str | None, at: Sequence[int]) -> str | None:
    """The items at these positions of a JSON array's text, as a JSON array's text."""
    if text is None:
        return None
    found = schema.decoded(text)
    return json.dumps([found[i] for i in at]) if isinstance(found, list) else None


class Store:
    """Stored results, in an SQLite file or a PostgreSQL database."""

    def __init__(
        self,
        where: Path | str | None = None,
        *,
        writable: bool = True,
        lister: Lister | None = None,
    ) -> None:
        """Open the database; `writable=False` never writes to it: no schema, no migration,
        no journal mode, no backup (an older schema is read as it is). `lister` makes the text
        each row written keeps (its listing); None: none, a reader makes it from the record."""
        where = where if where is not None else connect.default_path()
        self._lister = lister
        self.path: Path | None = None
        self._url: str | None = None
        if connect.is_url(where):
            self._url = str(where)
            self.where = connect.redacted(self._url)
            self.dialect = schema.POSTGRES
            self._db: Any = connect.postgres(self._url, self.where)
        else:
            self.path = Path(where)
            self.where = str(self.path)
            self.dialect = schema.SQLITE
            self._db = connect.sqlite(self.path, writable)
        try:
            self._check_ours(writable)
            if writable:
                self._migrate()
                if self.dialect is schema.SQLITE:
                    self._execute("PRAGMA journal_mode = WAL")  # readers never block the writer
            elif self._version() < schema.SCHEMA_VERSION:  # its listings are another version's
                log.warning(
                    "%s is from an earlier accelbench: a table, report or comparison of it lists "
                    "each result from its record, more slowly, until a run or an import stores "
                    "the listings for this one",
                    self.where,
                )
        except self._errors() as exc:
            self._db.close()
            raise AccelbenchError(
                f"{self.where} is not a usable accelbench database ({self._message(exc)}); pass "
                "--db with another one"
            ) from exc
        except AccelbenchError:
            self._db.close()
            raise

    def _errors(self) -> tuple[type[Exception], ...]:
        sqlite = self.dialect is schema.SQLITE
        return (sqlite3.Error,) if sqlite else (connect.psycopg_module().Error,)

    def _message(self, exc: Exception) -> str:
        return connect.without_secrets(one_line(exc), self._url) if self._url else one_line(exc)

    def _check_ours(self, writable: bool) -> None:
        """Refuse another application's database before anything is written to it; a
        read-only open of one with no results says so."""
        version = self._version()
        if self.dialect is schema.SQLITE:
            rows = self._execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            tables = sorted(name for (name,) in rows)
        else:
            found = self._execute("SELECT to_regclass('results')").fetchone()[0] is not None
            tables = ["results"] if found else []
        # Version 0 with only a results table is another accelbench creating it right now.
        if (version == 0 and set(tables) - {"results"}) or (
            version > 0 and "results" not in tables
        ):
            shown = ", ".join(tables[:5]) or "no results table"
            raise AccelbenchError(
                f"{self.where} is not an accelbench database ({shown}): pass --db with an "
                "accelbench database, or a new path"
            )
        if version == 0 and not writable:
            raise AccelbenchError(
                f"no results in {self.where} yet: run a benchmark first or pass --db"
            )

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def put(self, result: Result) -> None:
        """Store `result`, replacing any earlier result with the same key."""
        updates = ", ".join(f"{c} = excluded.{c}" for c in schema.COLUMNS[1:])

        def write() -> None:
            with self._transaction():
                self._execute(schema.INSERT + f"DO UPDATE SET {updates}", self._row(result))

        self._retrying(write)

    def add(self, results: Sequence[Result]) -> int:
        """Store those of `results` whose key is not stored yet, all in one transaction (none
        if any fails), tried again while the database is locked; returns how many were new."""
        return self._retrying(lambda: self.add_stream(results)[0])

    def add_stream(self, results: Iterable[Result | Row]) -> tuple[int, int]:
        """Store those of `results` whose key is not stored yet, as they come (a JSON Lines
        import), a batch at a time, in one transaction that an error from `results` rolls
        back, so nothing is stored unless all are; not retried, as the stream cannot be read
        twice. Each is a result, or its row made already (schema.stored_row with this store's
        lister, in another process). Returns (new, read)."""
        new = read = 0
        each = iter(results)
        with self._transaction():
            # A batch's stored keys looked up at once: a re-import (a node's whole export, again)
            # makes no listing or flat row for what is stored, half the time of a record.
            while batch := list(itertools.islice(each, _LOOKED_UP)):
                read += len(batch)
                keyed = [(r.key if isinstance(r, Result) else str(r[0]), r) for r in batch]
                stored = self._present([key for key, _ in keyed])
                rows = []
                for key, result in keyed:
                    if key not in stored:
                        stored.add(key)  # a key twice in the stream: the first kept
                        rows.append(self._row(result) if isinstance(result, Result) else result)
                if rows:
                    new += self._execute_many(schema.INSERT + "DO NOTHING", rows).rowcount
        return new, read

    def _present(self, keys: Sequence[str]) -> set[str]:
        """Those of these keys that are stored."""
        sql = f"SELECT key FROM results WHERE key IN ({', '.join('?' * len(keys))})"
        return {key for (key,) in self._execute(sql, keys).fetchall()}

    def _row(self, result: Result) -> Row:
        return schema.stored_row(result, self._lister)

    @property
    def lister(self) -> Lister | None:
        """What makes the listing and flat row of each result this store writes."""
        return self._lister

    def get(self, key: str) -> Result | None:
        sql = "SELECT record FROM results WHERE key = ?"
        row = self._retrying(lambda: self._execute(sql, (key,)).fetchone())
        return schema.record(row[0]) if row else None

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """`attempt`, tried again after a bounded back-off when the database is locked or a
        PostgreSQL connection was lost (reconnecting first); any other database error, or the
        last try's, becomes one line naming the database."""
        for wait_s in (*RETRY_WAITS_S, None):
            try:
                return attempt()
            except self._errors() as exc:
                if wait_s is None or not self._transient(exc):
                    raise AccelbenchError(f"{self.where}: {self._message(exc)}") from exc
                log.warning("%s: %s; trying again in %g s", self.where, self._message(exc), wait_s)
                time.sleep(wait_s)
                if self._url is not None:
                    self._reconnect()
        raise AssertionError("unreachable")

    def _reconnect(self) -> None:
        """A new PostgreSQL connection in place of the lost one. If the server is not back yet,
        the closed connection stays, and the next try fails on it and waits again."""
        with suppress(Exception):
            self._db.close()
        with suppress(AccelbenchError):
            self._db = connect.postgres(self._url or "", self.where)

    def _transient(self, exc: Exception) -> bool:
        if self.dialect is schema.SQLITE:
            return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
        return isinstance(exc, connect.psycopg_module().OperationalError)

    def query(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[Result]:
        """Stored results, oldest first; `platform` matches any part of the platform name;
        `limit`: the newest that many."""
        where, args = self._filters(workload, platform, status)
        sql = f"SELECT record FROM results{where} ORDER BY created_at DESC, key"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._retrying(lambda: self._execute(sql, args).fetchall())
        return [schema.record(r[0]) for r in reversed(rows)]

    def listing_texts(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> Iterator[tuple[str, str | None]]:
        """query()'s results as (key, the text its lister made, None where none did), oldest
        first, read a batch at a time (the text of a batch held, not of the table)."""
        rows = self._rows(
            f"key, {self._listing()}, created_at", (workload, platform, status), 1000, limit
        )
        yield from ((key, text) for key, text, _ in rows)

    def listed(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        listing_at: Sequence[int] = (),
        flat: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[Any, ...]] | None:
        """query()'s results as (created_at, key, listing), with `flat` its flat row too, a
        batch at a time, without reading a record; None where the schema is not this
        accelbench's (its records may be of another form: read them). With `listing_at`, of the
        listing (a JSON array) only the items at these positions, as a JSON array."""
        if self._version() != schema.SCHEMA_VERSION:
            return None
        filters, more = (workload, platform, status), ", flat" if flat else ""
        if listing_at and self.dialect is schema.SQLITE:  # SQLite's JSON takes them out
            paths = ", ".join(f"'$[{int(i)}]'" for i in listing_at)
            columns = f"created_at, key, json_extract(listing, {paths}){more}"
            return self._rows(columns, filters, 1000, limit)
        rows = self._rows(f"created_at, key, listing{more}", filters, 1000, limit)
        if not listing_at:
            return rows
        # PostgreSQL's JSON operators refuse a listing's \u0000: taken out here instead.
        return ((at, key, _items(text, listing_at), *rest) for at, key, text, *rest in rows)

    def briefs(
        self, *, workload: str | None = None, platform: str | None = None, status: str | None = None
    ) -> list[Brief]:
        """query()'s results as their indexed columns (schema.Brief): no record read. Read a
        batch at a time: the rows as read are not all held beside their briefs (at 1M results,
        the briefs' 0.3 GB and the rows' 0.6 GB more)."""
        rows = self._rows(", ".join(Brief._fields), (workload, platform, status), 5000)
        return [Brief.read(row) for row in rows]

    def brief_texts(
        self, *, workload: str | None = None, platform: str | None = None, status: str | None = None
    ) -> Iterator[tuple[Brief, str | None]]:
        """briefs() with the text each row's lister made (None where none did), in one read of
        the table, a batch at a time."""
        columns = f"{', '.join(Brief._fields)}, {self._listing()}"
        for *brief, text in self._rows(columns, (workload, platform, status), 1000):
            yield Brief.read(brief), text

    def _listing(self) -> str:
        """The listing column, as a query selects it (NULL in a schema from before it)."""
        return "listing" if self._version() >= schema.LISTED else "NULL"

    def records(self, keys: Sequence[str]) -> list[Result]:
        """The results of these keys, in their order."""
        found = self.held(keys)
        return [found[k] for k in keys]

    def held(self, keys: Sequence[str]) -> dict[str, Result]:
        """The results of those of these keys that it holds, by key."""
        return {key: schema.record(text) for key, text in self._texts(keys)}

    def _texts(self, keys: Sequence[str], table: str = "results") -> Iterator[tuple[str, str]]:
        """(key, record) of these keys, read 500 at a time."""
        batch = 500
        for i in range(0, len(keys), batch):
            part = keys[i : i + batch]
            sql = f"SELECT key, record FROM {table} WHERE key IN ({', '.join('?' * len(part))})"
            yield from self._retrying(lambda: self._execute(sql, part).fetchall())  # noqa: B023

    def stream(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        batch: int = 256,
        imported: bool = False,
    ) -> Iterator[Result]:
        """query()'s results one at a time, in its order, a batch of rows held (_rows);
        `imported`: sharing their equal specs and environments, as an import's (IMPORTED)."""
        rows = self._rows("record", (workload, platform, status), batch)
        context = schema.IMPORTED if imported else schema.STORED
        yield from (schema.record(text, context) for (text,) in rows)

    def stream_texts(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        batch: int = 256,
    ) -> Iterator[tuple[str, str, str]]:
        """stream()'s results as (created_at, key, their JSON as this accelbench stores it):
        the stored text itself where the schema is this accelbench's, so that its records
        were written, or written again, by it (validated, without secrets); else each record
        read and written again."""
        rows = self._rows("created_at, key, record", (workload, platform, status), batch)
        if self._version() == schema.SCHEMA_VERSION:
            yield from rows
        else:
            yield from ((at, key, schema.stored_json(schema.record(t))) for at, key, t in rows)

    def _rows(
        self,
        columns: str,
        filters: tuple[str | None, str | None, str | None],
        batch: int,
        limit: int | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """The columns of query()'s rows, in its order (`limit`: the newest that many, oldest
        first; created_at among the columns), read `batch` rows at a time from a cursor:
        memory holds a batch, not the table. On PostgreSQL the cursor is the server's (a
        client's would fetch every row first)."""
        where, args = self._filters(*filters)
        sql = f"SELECT {columns} FROM results{where}"
        if limit is not None:
            sql = f"SELECT * FROM ({sql} ORDER BY created_at DESC, key LIMIT {int(limit)}) AS n"
        sql += " ORDER BY created_at, key DESC"
        if self.dialect is schema.SQLITE:
            cursor = self._retrying(lambda: self._execute(sql, args))
        else:  # WITH HOLD: it outlives a transaction, as autocommit has one per statement
            cursor = self._db.cursor(name=f"accelbench_stream_{next(_CURSORS)}", withhold=True)
            self._retrying(lambda: cursor.execute(sql.replace("?", self.dialect.param), args))
        try:
            while rows := cursor.fetchmany(batch):
                yield from rows
        finally:
            cursor.close()

    @staticmethod
    def _filters(
        workload: str | None, platform: str | None, status: str | None
    ) -> tuple[str, list[object]]:
        where: list[str] = []
        args: list[object] = []
        for column, value in (("workload", workload), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if platform is not None:
            where.append("platform LIKE ?")
            args.append(f"%{platform}%")
        return (" WHERE " + " AND ".join(where) if where else ""), args

    def _execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        """Run one statement written with ? placeholders; returns its cursor."""
        return self._db.execute(sql.replace("?", self.dialect.param), params)

    def _execute_many(self, sql: str, rows: Sequence[Sequence[object]]) -> Any:
        """Run one statement for each row (PostgreSQL's in one pipeline); returns its cursor,
        whose rowcount is of them all."""
        cursor = self._db.cursor()
        cursor.executemany(sql.replace("?", self.dialect.param), rows)
        return cursor

    def _version(self) -> int:
        if self.dialect is schema.SQLITE:
            return int(self._execute("PRAGMA user_version").fetchone()[0])
        if self._execute("SELECT to_regclass('accelbench_schema')").fetchone()[0] is None:
            return 0
        return int(self._execute("SELECT version FROM accelbench_schema").fetchone()[0])

    def _migrate(self) -> None:
        version = self._version()
        if version > schema.SCHEMA_VERSION:
            raise AccelbenchError(
                f"{self.where} has schema {version}, newer than this accelbench ({schema.SCHEMA_VERSION}); "
                "upgrade accelbench or pass --db with another one"
            )
        if version == schema.SCHEMA_VERSION:
            return
        pending = range(version, schema.SCHEMA_VERSION)
        relists = all(schema.MIGRATIONS[m] is schema.RELIST for m in pending)
        if version > 0 and self.path is not None and not relists:  # keep the file as it was
            connect.keep_copy(self._db, self.path, version, schema.SCHEMA_VERSION)
        with self._migration_lock(), self._transaction():
            version = self._version()  # another process may have migrated it meanwhile
            if version == schema.SCHEMA_VERSION:
                return
            if version > 0 and self.dialect is schema.POSTGRES and not relists:
                self._execute(f"CREATE TABLE results_schema{version}_backup AS TABLE results")
                self._clean_backup(f"results_schema{version}_backup")
                log.warning(
                    "%s: migrating schema %d to %d; the results as they were are kept in "
                    "results_schema%d_backup",
                    self.where,
                    version,
                    schema.SCHEMA_VERSION,
                    version,
                )
            pending = range(version, schema.SCHEMA_VERSION)
            for migration in pending:
                for statement in schema.statements(migration, self.dialect):
                    self._execute(statement)
            # Once, after the columns are all there: a rewrite stores every record as this
            # accelbench reads it, whichever migrations asked for one.
            if any(schema.MIGRATIONS[m] is schema.REWRITE for m in pending):
                self._rewrite()
            elif any(schema.MIGRATIONS[m] is schema.RELIST for m in pending):
                self._relist()
            if self.dialect is schema.SQLITE:
                self._execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION}")
            else:
                self._execute("CREATE TABLE IF NOT EXISTS accelbench_schema (version INTEGER)")
                self._execute("DELETE FROM accelbench_schema")
                self._execute("INSERT INTO accelbench_schema VALUES (?)", (schema.SCHEMA_VERSION,))

    def _clean_backup(self, table: str) -> None:
        """The backup's records less any secret, which the rewrite takes out of the results."""
        keys = [key for (key,) in self._execute(f"SELECT key FROM {table}").fetchall()]
        for key, text in self._texts(keys, table=table):
            if (cleaned := connect.clean_stored(text)) != text:
                self._execute(f"UPDATE {table} SET record = ? WHERE key = ?", (cleaned, key))

    def _rewrite(self) -> None:
        """Every row again from its record as read now; a record this accelbench cannot read
        is left as it was, less its secrets."""
        updates = ", ".join(f"{c} = ?" for c in schema.COLUMNS[1:])
        keys = [key for (key,) in self._execute("SELECT key FROM results").fetchall()]
        for key, text in self._texts(keys):  # a batch at a time: memory holds no table
            try:
                row = self._row(schema.record(text))
            except AccelbenchError:  # another version's form: left as stored, less secrets
                log.warning("%s: result %s is unreadable: left as stored", self.where, key)
                cleaned = connect.clean_stored(text)
                self._execute("UPDATE results SET record = ? WHERE key = ?", (cleaned, key))
                continue
            self._execute(f"UPDATE results SET {updates} WHERE key = ?", (*row[1:], key))

    def _relist(self) -> None:
        """Every row's listing and flat row made again from its record by the lister (none
        without one); a record this accelbench cannot read keeps none (a reader makes them
        when it can)."""
        keys = [key for (key,) in self._execute("SELECT key FROM results").fetchall()]
        log.warning("%s: listing %d results again for this accelbench", self.where, len(keys))

        def again(key: str, text: str) -> tuple[str | None, str | None, str]:
            try:
                made = self._lister(schema.record(text)) if self._lister else (None, None)
            except AccelbenchError:
                made = (None, None)
            return *made, key

        updates = itertools.starmap(again, self._texts(keys))
        while batch := list(itertools.islice(updates, _LOOKED_UP)):
            self._execute_many("UPDATE results SET listing = ?, flat = ? WHERE key = ?", batch)

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """One migrating process at a time. On PostgreSQL the lock is taken before the
        transaction begins: a session refreshes its cached catalog when a transaction begins,
        not when an advisory lock is granted, so one that waited inside its transaction could
        miss the tables the holder made meanwhile. (On SQLite, BEGIN IMMEDIATE is the lock.)"""
        if self.dialect is schema.SQLITE:
            yield
            return
        self._execute(f"SELECT pg_advisory_lock({_MIGRATION_LOCK})")
        try:
            yield
        finally:
            self._execute(f"SELECT pg_advisory_unlock({_MIGRATION_LOCK})")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.dialect is schema.POSTGRES:
            with self._db.transaction():
                yield
            return
        self._execute("BEGIN IMMEDIATE")  # takes the write lock now: no deadlock on upgrade
        try:
            yield
            self._execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):  # a failed COMMIT may have ended it already
                self._execute("ROLLBACK")
            raise
