"""Results moved between machines: `accelbench export` writes them as JSON, and `accelbench
import` reads such a file, or another accelbench SQLite database, into the store.

A file to import is read whole and every record validated (the same model the store uses) before
anything is written, and then written in one transaction: a malformed or hostile file changes
nothing. A record whose key is stored already is the same cell on the same platform and is
skipped, never overwritten.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from accelbench.errors import AccelbenchError, one_line
from accelbench.result import Result

FORMAT = "accelbench-results"
VERSION = 1
SQLITE_HEADER = b"SQLite format 3\x00"
HINT = "give a file made by `accelbench export`, or an accelbench .sqlite database"


def dumps(results: Sequence[Result]) -> str:
    """The export file: standard JSON, NaN and infinity written as strings as the store does
    (model_dump would keep them as floats, which json.dumps writes as bare NaN)."""
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "results": [json.loads(r.model_dump_json()) for r in results],
    }
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def load(path: Path) -> list[Result]:
    """The results in an export file or an SQLite database, all validated."""
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
            if head == SQLITE_HEADER:
                return _from_sqlite(path)
            data = head + f.read()
    except OSError as exc:
        raise AccelbenchError(f"cannot read {path} ({one_line(exc)}): {HINT}") from None
    return parse(data, str(path))


def parse(data: bytes, name: str) -> list[Result]:
    """The results of an export file's bytes; AccelbenchError for anything else."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise AccelbenchError(f"{name} is not JSON ({one_line(exc)}): {HINT}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AccelbenchError(
            f'{name} is not an accelbench export (no "format": "{FORMAT}"): {HINT}'
        )
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise AccelbenchError(f'{name}: "version" must be a positive whole number: {HINT}')
    if version > VERSION:
        raise AccelbenchError(
            f"{name} was exported by a newer accelbench (format version {version}, this one reads "
            f"{VERSION}): upgrade accelbench"
        )
    records = doc.get("results")
    if not isinstance(records, list):
        raise AccelbenchError(f'{name}: "results" must be a list of results: {HINT}')
    results = []
    for i, record in enumerate(records):
        try:
            results.append(Result.model_validate(record))
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(map(str, error["loc"])) or "the record"
            raise AccelbenchError(
                f"{name}: result {i}: {where}: {error['msg']}; nothing was imported"
            ) from None
        except (AccelbenchError, RecursionError) as exc:  # a validator's own message, or depth
            why = str(exc) if isinstance(exc, AccelbenchError) else one_line(exc)
            raise AccelbenchError(f"{name}: result {i}: {why}; nothing was imported") from None
    return results


def _from_sqlite(path: Path) -> list[Result]:
    """The results of another database, read from a copy: an older schema is migrated in the
    copy, and the file itself is never written."""
    from accelbench.store import ResultStore

    with tempfile.TemporaryDirectory(prefix="accelbench-import-") as tmp:
        copy = Path(tmp) / "copy.sqlite"
        try:
            with (
                sqlite3.connect(f"file:{path}?mode=ro", uri=True) as source,
                sqlite3.connect(copy) as dest,
            ):
                source.backup(dest)  # consistent even while another process writes to it
            source.close()
            dest.close()
        except sqlite3.DatabaseError as exc:
            raise AccelbenchError(f"cannot read {path} ({one_line(exc)}): {HINT}") from None
        try:
            with ResultStore(copy) as store:
                return store.query()
        except AccelbenchError as exc:
            raise AccelbenchError(str(exc).replace(str(copy), str(path))) from None
