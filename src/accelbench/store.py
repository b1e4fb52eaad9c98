"""The results database: the only module that knows SQL.

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

import json
import logging
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accelbench.errors import AccelbenchError, one_line
from accelbench.result import Result

log = logging.getLogger(__name__)

REWRITE = "rewrite"
NETWORK_FILE_SYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "lustre",
        "gpfs",
        "beegfs",
        "glusterfs",
        "ceph",
        "fuse.sshfs",
        "9p",
    }
)
"""Where SQLite's file locks cannot be trusted with several writers (sqlite.org/useovernet)."""

MIGRATIONS = [
    """
    CREATE TABLE results (
        key TEXT PRIMARY KEY,
        workload TEXT NOT NULL,
        scenario TEXT NOT NULL,
        platform TEXT NOT NULL,
        device_type TEXT NOT NULL,
        num_devices INTEGER NOT NULL,
        micro_batch INTEGER NOT NULL,
        global_batch INTEGER NOT NULL,
        precision TEXT NOT NULL,
        status TEXT NOT NULL,
        items_per_s {real},
        last_epoch_s {real},
        hostname TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX results_workload ON results (workload, scenario);
    CREATE INDEX results_platform ON results (platform);
    CREATE INDEX results_status ON results (status);
    CREATE INDEX results_created_at ON results (created_at);
    """,
    """
    ALTER TABLE results ADD COLUMN time_to_target_s {real};
    UPDATE results SET time_to_target_s = {time_to_target_s};
    """,
    # Every record written again through Result: items_per_s becomes the delivered rate (the
    # median window before; a server's sustained rate, not its capacity), num_devices counts
    # pipeline stages, and CPU records lose their per-cell measured peak.
    REWRITE,
]
"""The schema's history, in order: SQL, where {names} are the back end's words (Dialect), or
REWRITE, which stores every record again as this accelbench reads it."""
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class Dialect:
    """What differs between the back ends' SQL."""

    real: str
    """The type of float columns (8 bytes)."""
    time_to_target_s: str
    """The time to target out of the JSON record."""
    param: str
    """Placeholder of a query parameter."""


SQLITE = Dialect("REAL", "json_extract(record, '$.metrics.time_to_train.time_to_target_s')", "?")
POSTGRES = Dialect(
    "DOUBLE PRECISION",
    "(record::jsonb #>> '{metrics,time_to_train,time_to_target_s}')::double precision",
    "%s",
)
_MIGRATION_LOCK = 0x61636362  # PostgreSQL advisory lock: one migrating process at a time


def statements(migration: int, dialect: Dialect) -> list[str]:
    """The SQL statements of one migration, in the back end's words (none for REWRITE)."""
    if MIGRATIONS[migration] is REWRITE:
        return []
    sql = MIGRATIONS[migration].format(real=dialect.real, time_to_target_s=dialect.time_to_target_s)
    return [s for s in sql.split(";") if s.strip()]


def is_url(where: str | Path) -> bool:
    return str(where).startswith(("postgresql://", "postgres://"))


_COLUMNS = (
    "key",
    "workload",
    "scenario",
    "platform",
    "device_type",
    "num_devices",
    "micro_batch",
    "global_batch",
    "precision",
    "status",
    "items_per_s",
    "last_epoch_s",
    "time_to_target_s",
    "hostname",
    "created_at",
    "record",
)


def default_path() -> Path | str:
    """$ACCELBENCH_DB, else results.sqlite in the user's data directory ($XDG_DATA_HOME)."""
    if os.environ.get("ACCELBENCH_DB"):
        where = os.environ["ACCELBENCH_DB"]
        return where if is_url(where) else Path(where)
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "accelbench" / "results.sqlite"


class ResultStore:
    """Stored results, in an SQLite file or a PostgreSQL database."""

    def __init__(self, where: Path | str | None = None, *, writable: bool = True) -> None:
        where = where if where is not None else default_path()
        self.path: Path | None = None
        if is_url(where):
            self.where = _redacted(str(where))
            self.dialect = POSTGRES
            self._db: Any = _connect_postgres(str(where), self.where)
            errors: tuple[type[Exception], ...] = (_psycopg().Error,)
        else:
            self.path = Path(where)
            self.where = str(self.path)
            self.dialect = SQLITE
            self._db = _connect_sqlite(self.path, writable)
            errors = (sqlite3.DatabaseError,)
        try:
            self._migrate()
        except errors as exc:
            self._db.close()
            raise AccelbenchError(
                f"{self.where} is not a usable accelbench database ({one_line(exc)}); pass --db "
                "with another one"
            ) from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def put(self, result: Result) -> None:
        """Store `result`, replacing any earlier result with the same key."""
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
        with self._transaction():
            self._execute(_INSERT + f"DO UPDATE SET {updates}", _row(result))

    def add(self, results: Sequence[Result]) -> int:
        """Store those of `results` whose key is not stored yet, all in one transaction (none
        if any fails); returns how many were new."""
        with self._transaction():
            return sum(self._execute(_INSERT + "DO NOTHING", _row(r)).rowcount for r in results)

    def has(self, key: str) -> bool:
        return self._execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None

    def get(self, key: str) -> Result | None:
        row = self._execute("SELECT record FROM results WHERE key = ?", (key,)).fetchone()
        return _record(row[0]) if row else None

    def query(
        self,
        *,
        workload: str | None = None,
        platform: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[Result]:
        """Stored results, oldest first; `platform` matches any part of the platform name."""
        where, args = [], []
        for column, value in (("workload", workload), ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if platform is not None:
            where.append("platform LIKE ?")
            args.append(f"%{platform}%")
        sql = "SELECT record FROM results"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, key"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._execute(sql, args).fetchall()
        return [_record(r[0]) for r in reversed(rows)]

    def _execute(self, sql: str, params: Sequence[object] = ()) -> Any:
        """Run one statement written with ? placeholders; returns its cursor."""
        return self._db.execute(sql.replace("?", self.dialect.param), params)

    def _version(self) -> int:
        if self.dialect is SQLITE:
            return int(self._execute("PRAGMA user_version").fetchone()[0])
        if self._execute("SELECT to_regclass('accelbench_schema')").fetchone()[0] is None:
            return 0
        return int(self._execute("SELECT version FROM accelbench_schema").fetchone()[0])

    def _migrate(self) -> None:
        version = self._version()
        if version > SCHEMA_VERSION:
            raise AccelbenchError(
                f"{self.where} has schema {version}, newer than this accelbench ({SCHEMA_VERSION}); "
                "upgrade accelbench or pass --db with another one"
            )
        if version == SCHEMA_VERSION:
            return
        if version > 0 and self.path is not None:  # results in it: keep the file as it was
            backup = self.path.with_name(f"{self.path.name}.schema{version}.bak")
            with sqlite3.connect(backup) as copy:
                self._db.backup(copy)
            copy.close()
            log.warning(
                "%s: migrating schema %d to %d; the database as it was is kept in %s",
                self.where,
                version,
                SCHEMA_VERSION,
                backup,
            )
        with self._migration_lock(), self._transaction():
            version = self._version()  # another process may have migrated it meanwhile
            if version == SCHEMA_VERSION:
                return
            if version > 0 and self.dialect is POSTGRES:
                self._execute(f"CREATE TABLE results_schema{version}_backup AS TABLE results")
                log.warning(
                    "%s: migrating schema %d to %d; the results as they were are kept in "
                    "results_schema%d_backup",
                    self.where,
                    version,
                    SCHEMA_VERSION,
                    version,
                )
            for migration in range(version, SCHEMA_VERSION):
                for statement in statements(migration, self.dialect):
                    self._execute(statement)
                if MIGRATIONS[migration] is REWRITE:
                    self._rewrite()
            if self.dialect is SQLITE:
                self._execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            else:
                self._execute("CREATE TABLE IF NOT EXISTS accelbench_schema (version INTEGER)")
                self._execute("DELETE FROM accelbench_schema")
                self._execute("INSERT INTO accelbench_schema VALUES (?)", (SCHEMA_VERSION,))

    def _rewrite(self) -> None:
        """Every row again from its record as read now; a record this accelbench cannot read
        is left as it was."""
        updates = ", ".join(f"{c} = ?" for c in _COLUMNS[1:])
        for key, text in self._execute("SELECT key, record FROM results").fetchall():
            try:
                row = _row(_record(text))
            except AccelbenchError:
                log.warning(
                    "%s: result %s is in a form this accelbench cannot read; left as stored",
                    self.where,
                    key,
                )
                continue
            self._execute(f"UPDATE results SET {updates} WHERE key = ?", (*row[1:], key))

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """One migrating process at a time. On PostgreSQL the lock is taken before the
        transaction begins: a session refreshes its cached catalog when a transaction begins,
        not when an advisory lock is granted, so one that waited inside its transaction could
        miss the tables the holder made meanwhile. (On SQLite, BEGIN IMMEDIATE is the lock.)"""
        if self.dialect is SQLITE:
            yield
            return
        self._execute(f"SELECT pg_advisory_lock({_MIGRATION_LOCK})")
        try:
            yield
        finally:
            self._execute(f"SELECT pg_advisory_unlock({_MIGRATION_LOCK})")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.dialect is POSTGRES:
            with self._db.transaction():
                yield
            return
        self._execute("BEGIN IMMEDIATE")  # takes the write lock now: no deadlock on upgrade
        try:
            yield
        except BaseException:
            self._execute("ROLLBACK")
            raise
        self._execute("COMMIT")


def _connect_sqlite(path: Path, writable: bool) -> sqlite3.Connection:
    if writable:
        _check_writable(path)
        fs = file_system(path)
        if fs in NETWORK_FILE_SYSTEMS:
            log.warning(
                "%s is on %s, a network file system, where SQLite's locks are unreliable with "
                "several writers: keep --db on a local disk, or use a PostgreSQL URL",
                path,
                fs,
            )
    elif not path.exists():
        raise AccelbenchError(f"no results database at {path}; run a benchmark first or pass --db")
    try:
        db = sqlite3.connect(path, timeout=30, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 30000")
        if writable:
            db.execute("PRAGMA journal_mode = WAL")  # readers never block the writer
    except sqlite3.DatabaseError as exc:
        raise AccelbenchError(
            f"{path} is not a usable accelbench database ({exc}); pass --db with another path"
        ) from exc
    return db


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise AccelbenchError(
            "a PostgreSQL --db needs psycopg: pip install 'accelbench[postgres]'"
        ) from None
    return psycopg


def _connect_postgres(url: str, shown: str) -> Any:
    psycopg = _psycopg()
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise AccelbenchError(
            f"cannot connect to {shown} ({one_line(exc)}); check the URL and that the server runs"
        ) from exc


def _redacted(url: str) -> str:
    """The URL without its password, fit to print."""
    return re.sub(r"://([^:/@]*):[^@]*@", r"://\1:***@", url)


def file_system(path: Path) -> str | None:
    """The type of the file system that holds `path` (its deepest mount point), if known."""
    import psutil

    folder = str(path.resolve().parent)
    mounts = [
        p
        for p in psutil.disk_partitions(all=True)
        if folder == p.mountpoint or folder.startswith(p.mountpoint.rstrip("/") + "/")
    ]
    return max(mounts, key=lambda p: len(p.mountpoint)).fstype if mounts else None


def _check_writable(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AccelbenchError(
            f"cannot create {path.parent} ({exc.strerror}); pass --db with a writable path"
        ) from exc
    # SQLite writes its journal beside the file, so the folder must be writable too.
    for place in (path, path.parent):
        if place.exists() and not os.access(place, os.W_OK):
            raise AccelbenchError(f"cannot write to {place}; pass --db with a writable path")


_INSERT = (
    f"INSERT INTO results ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT(key) "
)


def _row(result: Result) -> tuple[object, ...]:
    spec, metrics = result.spec, result.metrics
    return (
        result.key,
        spec.workload,
        spec.scenario,
        result.env.platform,
        result.env.device_type,
        result.num_devices,
        spec.batch_size,
        spec.global_batch,
        spec.precision,
        result.status,
        result.items_per_s,
        metrics.epochs[-1].time_s if metrics else None,
        metrics.time_to_train.time_to_target_s if metrics and metrics.time_to_train else None,
        result.env.hostname,
        result.created_at.isoformat(),
        result.model_dump_json(),
    )


def _record(text: str) -> Result:
    try:
        return Result.model_validate_json(text)
    except ValidationError as exc:
        try:
            key = json.loads(text).get("key", "?")
        except (json.JSONDecodeError, AttributeError):  # not even a JSON object
            key = "?"
        raise AccelbenchError(
            f"stored result {key} does not match this accelbench's record format; upgrade accelbench"
        ) from exc
