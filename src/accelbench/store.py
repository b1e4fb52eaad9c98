"""The results database: the only module that knows SQL.

One wide table: indexed query columns for filtering, plus the full JSON record. Rows are keyed by
the result key (spec + platform), so storing a cell again replaces it instead of duplicating it.
The schema version lives in PRAGMA user_version; migrations run in order inside a transaction.
Open it with sqlite3, pandas or Datasette: `SELECT workload, items_per_s FROM results`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError

from accelbench.errors import AccelbenchError
from accelbench.result import Result

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
        items_per_s REAL,
        last_epoch_s REAL,
        hostname TEXT NOT NULL,
        created_at TEXT NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX results_workload ON results (workload, scenario);
    CREATE INDEX results_platform ON results (platform);
    CREATE INDEX results_status ON results (status);
    CREATE INDEX results_created_at ON results (created_at);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)

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
    "hostname",
    "created_at",
    "record",
)


def default_path() -> Path:
    """$ACCELBENCH_DB, else results.sqlite in the user's data directory ($XDG_DATA_HOME)."""
    if os.environ.get("ACCELBENCH_DB"):
        return Path(os.environ["ACCELBENCH_DB"])
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "accelbench" / "results.sqlite"


class ResultStore:
    def __init__(self, path: Path | str | None = None, *, writable: bool = True) -> None:
        self.path = Path(path) if path is not None else default_path()
        if writable:
            _check_writable(self.path)
        elif not self.path.exists():
            raise AccelbenchError(
                f"no results database at {self.path}; run a benchmark first or pass --db"
            )
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 30000")
            if writable:
                self._db.execute("PRAGMA journal_mode = WAL")  # readers never block the writer
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise AccelbenchError(
                f"{self.path} is not a usable accelbench database ({exc}); pass --db with another path"
            ) from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def put(self, result: Result) -> None:
        """Store `result`, replacing any earlier result with the same key."""
        row = _row(result)
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
        with self._transaction():
            self._db.execute(
                f"INSERT INTO results ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(row))}) "
                f"ON CONFLICT(key) DO UPDATE SET {updates}",
                row,
            )

    def has(self, key: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM results WHERE key = ?", (key,)).fetchone() is not None
        )

    def get(self, key: str) -> Result | None:
        row = self._db.execute("SELECT record FROM results WHERE key = ?", (key,)).fetchone()
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
        rows = self._db.execute(sql, args).fetchall()
        return [_record(r[0]) for r in reversed(rows)]

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise AccelbenchError(
                f"{self.path} has schema {version}, newer than this accelbench ({SCHEMA_VERSION}); "
                "upgrade accelbench or pass --db with another path"
            )
        if version == SCHEMA_VERSION:
            return
        with self._transaction():
            for sql in MIGRATIONS[version:]:
                for statement in sql.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


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


def _row(result: Result) -> tuple[object, ...]:
    spec, metrics = result.spec, result.metrics
    return (
        result.key,
        spec.workload,
        spec.scenario,
        result.env.platform,
        result.env.device_type,
        spec.replicas,
        spec.batch_size,
        spec.global_batch,
        spec.precision,
        result.status,
        result.items_per_s,
        metrics.epochs[-1].time_s if metrics else None,
        result.env.hostname,
        result.created_at.isoformat(),
        result.model_dump_json(),
    )


def _record(text: str) -> Result:
    try:
        return Result.model_validate_json(text)
    except ValidationError as exc:
        key = json.loads(text).get("key", "?") if text.startswith("{") else "?"
        raise AccelbenchError(
            f"stored result {key} does not match this accelbench's record format; upgrade accelbench"
        ) from exc
