"""Where the results database is and how to open it: the default path, an SQLite file (its
folder writable, read-only when only reading, a network file system warned about) or a
PostgreSQL URL, and that URL with its password hidden wherever it is shown."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError, one_line
from accelbench.secrets import MASK, clean_json, redact_url, scrub, url_secrets

log = logging.getLogger(__name__)

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


def is_url(where: str | Path) -> bool:
    return str(where).startswith(("postgresql://", "postgres://"))


def default_path() -> Path | str:
    """$ACCELBENCH_DB, else results.sqlite in the user's data directory ($XDG_DATA_HOME)."""
    if os.environ.get("ACCELBENCH_DB"):
        where = os.environ["ACCELBENCH_DB"]
        return where if is_url(where) else Path(where)
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "accelbench" / "results.sqlite"


def log_dir() -> Path:
    """Where each cell's output is kept: $ACCELBENCH_LOG_DIR, else accelbench/logs in the
    user's state directory ($XDG_STATE_HOME)."""
    if os.environ.get("ACCELBENCH_LOG_DIR"):
        return Path(os.environ["ACCELBENCH_LOG_DIR"])
    state_home = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(state_home) / "accelbench" / "logs"


def sqlite(path: Path, writable: bool) -> sqlite3.Connection:
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
        if writable:
            db = sqlite3.connect(path, timeout=30, isolation_level=None)
        else:  # never writes; a WAL database on a read-only mount is read as immutable
            db = _read_only(path)
        db.execute("PRAGMA busy_timeout = 30000")
    except sqlite3.DatabaseError as exc:
        raise AccelbenchError(
            f"{path} is not a usable accelbench database ({exc}); pass --db with another path"
        ) from exc
    return db


def _read_only(path: Path) -> sqlite3.Connection:
    uri = path.resolve().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30, isolation_level=None)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:  # no -shm beside a WAL file, and none may be made
        db.close()
        if os.access(path.parent, os.W_OK):
            raise
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)


def psycopg_module() -> Any:
    try:
        import psycopg
    except ImportError:
        raise AccelbenchError(
            "a PostgreSQL --db needs psycopg: pip install 'accelbench[postgres]'"
        ) from None
    return psycopg


def postgres(url: str, shown: str) -> Any:
    psycopg = psycopg_module()
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise AccelbenchError(
            f"cannot connect to {shown} ({without_secrets(one_line(exc), url)}); check the URL "
            "and that the server runs"
        ) from exc


def redacted(url: str) -> str:
    """The URL with every password in it (user-info or a password= parameter) as ***, fit to
    print (secrets.redact_url)."""
    return redact_url(url)


def without_secrets(text: str, url: str) -> str:
    """`text` with each secret `url` carries replaced by ***, as written and decoded."""
    for secret in sorted(url_secrets(url), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return scrub(text)


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


def clean_stored(text: str) -> str:
    """A stored record's text less any secret (secrets.clean_json), or as it is if not JSON."""
    try:
        return clean_json(text)
    except ValueError:  # not JSON: nothing accelbench wrote, so nothing it would have leaked
        return text


def keep_copy(db: sqlite3.Connection, path: Path, version: int, target: int) -> None:
    """A copy of the SQLite file as it was, beside it, before schema `version` is migrated to
    `target`; a warning says where."""
    backup = path.with_name(f"{path.name}.schema{version}.bak")
    with sqlite3.connect(backup) as copy:
        db.backup(copy)
        # The copy keeps the results as they were, less any secret (a password in a stored
        # command line): the rewrite after it takes them out of the database too.
        copy.create_function("clean_json", 1, clean_stored, deterministic=True)
        copy.execute("UPDATE results SET record = clean_json(record)")
    copy.close()
    log.warning(
        "%s: migrating schema %d to %d; the database as it was is kept in %s",
        path,
        version,
        target,
        backup,
    )
