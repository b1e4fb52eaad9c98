"""The results table's schema: its columns, the row a result is stored as, how a stored record
is read back, and the migrations that brought older databases here, in each back end's SQL."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
from pydantic import ValidationError

from accelbench import secrets
from accelbench.errors import AccelbenchError
from accelbench.records.frozen import sharing
from accelbench.records.result import Result
from accelbench.records.spec import STORED
from accelbench.scenarios.base import series

REWRITE = "rewrite"
RELIST = "relist"


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
    # Every record written again: a scenario's own part (the server's rates, serve's trials,
    # generate's token timings, time to train's outcome) moves from a field named after its
    # scenario to metrics.record, which names its kind.
    REWRITE,
    # Each row's listing (report.listing): what the results table shows of it, so that a
    # listing reads no record; the rewrite computes it.
    "ALTER TABLE results ADD COLUMN listing TEXT",
    REWRITE,
    # Every record written again without secrets (secrets.clean_record): earlier versions
    # stored the command line as typed, a database password in its --db URL included.
    REWRITE,
    # Listing version 7: each keeps the parts its result takes in the report's figures.
    RELIST,
    # Listing version 8: a scenario's own figures (the server's latency, apart from batches').
    RELIST,
    # Listing version 9: each keeps its headline's interval, for compare.
    RELIST,
    # Listing version 10: each keeps its repeat, which a report's row of a cell's runs omits.
    RELIST,
    # Listing version 11: each keeps what compare matches on and the software history
    # attributes a change to, which the database took out of each record (on PostgreSQL a cast
    # of every record to jsonb: 2.3 minutes for a site's 100,000); and each row its flat row,
    # the CSV's (report.tabular), so that a CSV validates no record.
    "ALTER TABLE results ADD COLUMN flat TEXT",
    RELIST,
    # Listing version 12: its cells' keys hashed from orjson's text of them, not json's.
    RELIST,
]
"""The schema's history, in order: SQL, where {names} are the back end's words (Dialect);
REWRITE, which stores every record again as this accelbench reads it; or RELIST, which makes
every row's listing again (its records untouched, so no copy is kept): appended whenever
report.listing.VERSION changes, so that an upgraded database is listed once, at its first
writable open, not made again from its records at every read (LISTING_VERSION)."""

LISTING_VERSION = 12
"""The listing version the last migration lists with: report.listing.VERSION (a test)."""


SCHEMA_VERSION = len(MIGRATIONS)
LISTED = 5
"""The first schema with the listing column (a read-only open reads an older one as it is)."""


@dataclass(frozen=True)
class Dialect:
    """What differs between the back ends' SQL."""

    real: str
    """The type of float columns (8 bytes)."""
    time_to_target_s: str
    """The time to target out of the JSON record."""
    param: str
    """Placeholder of a query parameter."""


SQLITE = Dialect(
    "REAL",
    "json_extract(record, '$.metrics.time_to_train.time_to_target_s')",
    "?",
)


POSTGRES = Dialect(
    "DOUBLE PRECISION",
    "(record::jsonb #>> '{metrics,time_to_train,time_to_target_s}')::double precision",
    "%s",
)


def statements(migration: int, dialect: Dialect) -> list[str]:
    """The SQL statements of one migration, in the back end's words (none for REWRITE and
    RELIST)."""
    if MIGRATIONS[migration] in (REWRITE, RELIST):
        return []
    sql = MIGRATIONS[migration].format(real=dialect.real, time_to_target_s=dialect.time_to_target_s)
    return [s for s in sql.split(";") if s.strip()]


COLUMNS = (
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
    "listing",
    "flat",
)


INSERT = (
    f"INSERT INTO results ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
    "ON CONFLICT(key) "
)


class Brief(NamedTuple):
    """A stored result's indexed columns (COLUMNS), read without its record: what reports
    choose the records they read by (report.sections)."""

    key: str
    workload: str
    scenario: str
    platform: str
    num_devices: int
    micro_batch: int
    precision: str
    status: str
    hostname: str
    created_at: str

    @classmethod
    def read(cls, row: Sequence[Any]) -> Brief:
        """A row as read from the database, its names held once (a site has few of them)."""
        key, workload, scenario, platform, devices, batch, precision, status, host, made = row
        i = sys.intern
        names = i(workload), i(scenario), i(platform)
        return cls(key, *names, devices, batch, i(precision), i(status), i(host), made)


def brief(result: Result) -> Brief:
    spec = result.spec
    return Brief(
        result.key,
        spec.workload,
        spec.scenario,
        result.platform,
        result.num_devices,
        spec.batch_size,
        spec.precision,
        result.status,
        result.env.hostname,
        result.created_at.isoformat(),
    )


Row = tuple[object, ...]
"""A result as the results table stores it (row()), its key first."""
Lister = Callable[[Result], tuple[str, str]]
"""What makes the texts a row keeps beside its record, for what lists results without reading
records: its listing and its flat row (report.database.stored_texts)."""


def row(result: Result, listing: str | None, flat: str | None) -> Row:
    """The row's columns, in COLUMNS' order, with the listing and flat row its store's lister
    made (None: none, made when read); those a Brief holds as brief() reads them from the result, so
    that a stored brief and one made in memory agree."""
    b, metrics = brief(result), result.metrics
    return (
        b.key,
        b.workload,
        b.scenario,
        b.platform,
        result.env.device_type,
        b.num_devices,
        b.micro_batch,
        result.spec.global_batch,
        b.precision,
        b.status,
        result.items_per_s,
        metrics.epochs[-1].time_s if metrics else None,
        ttt.value if (ttt := series(result, "time_to_target")) else None,
        b.hostname,
        b.created_at,
        stored_json(result),
        listing,
        flat,
    )


def stored_row(result: Result, lister: Lister | None) -> Row:
    """The result's row in the results table, with the listing and flat row `lister` makes
    (None: none, made when read)."""
    return row(result, *(lister(result) if lister else (None, None)))


def stored_json(result: Result, indent: int | None = None) -> str:
    """The result's JSON as it may be stored or exported: without any secret (secrets)."""
    by_name = secrets.named(result.argv, result.env.env_vars, result.tags)
    return secrets.clean_json(result.model_dump_json(indent=indent), indent, by_name=by_name)


def decoded(text: str) -> Any:
    """JSON that accelbench stored (a listing, a flat row), parsed by orjson (a site's 100,000
    listings or flat rows in two fifths of json's time); by json where orjson refuses what json
    writes (NaN, Infinity)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


IMPORTED: dict[str, Any] = STORED | sharing()
"""The validation context of an import's records: those read back, with one table of the specs
and environments validated, which the records that hold equal ones share (frozen.shared)."""


def record(text: str, context: dict[str, Any] = STORED) -> Result:
    """A stored record as a Result (`context`: IMPORTED for an import's)."""
    try:
        return Result.model_validate_json(text, context=context)
    except ValidationError as exc:
        try:
            key = json.loads(text).get("key", "?")
        except (json.JSONDecodeError, AttributeError):  # not even a JSON object
            key = "?"
        raise AccelbenchError(
            f"stored result {key} does not match this accelbench's record format; upgrade accelbench"
        ) from exc
