"""The JSON formats of results: `accelbench export` writes them, `accelbench import` reads such a
file, or another accelbench SQLite database, into the store; `results --format json`. The flat
CSV schema is tabular.py's.

A file to import is read a result at a time, each validated (the same model the store uses) and
written in one transaction that anything wrong rolls back: a malformed or hostile file changes
nothing, and memory holds one result of it (with --jobs, a few chunks of a JSON Lines file's
lines, read, validated and listed in other processes: stored_lines). A record whose key is
stored already is the same cell on the same platform and is skipped, never overwritten.
"""

from __future__ import annotations

import io
import itertools
import json
import multiprocessing
import os
import signal
import sqlite3
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from accelbench import secrets
from accelbench.errors import AccelbenchError, first_invalid, one_line
from accelbench.records.result import Result, result_key
from accelbench.storage.json_stream import NOT_EXACT, Reader, exact
from accelbench.storage.schema import IMPORTED, Lister, Row, stored_json, stored_row

FORMAT = "accelbench-results"
VERSION = 1
SQLITE_HEADER = b"SQLite format 3\x00"
HINT = "give a file made by `accelbench export`, or an accelbench .sqlite database"
MAX_IMPORT_BYTES = 1 << 30
TOP_LEVEL = frozenset({"format", "version", "exported_at", "results"})
LINES = "lines"
"""The header's layout of a JSON Lines export (`export --format jsonl`)."""
MAX_LINE_BYTES = 256 << 20
"""The longest result an import reads (a serve record of many requests is a few MB)."""


def dumps(results: Sequence[Result]) -> str:
    """The export file (write_document's)."""
    return text_of(write_document, results)


def text_of(write: Callable[[Iterable[Result], TextIO], int], results: Sequence[Result]) -> str:
    """What `write` writes of the results, as text."""
    buffer = io.StringIO()
    write(results, buffer)
    return buffer.getvalue()


def _primed(results: Iterable[Result | str]) -> Iterator[str]:
    """The results' JSON as stored (a text is one already: Store.stream_texts), the first
    already read: a database that cannot be read fails before any line of an export is
    written."""
    each = (r if isinstance(r, str) else stored_json(r) for r in results)
    first = next(each, None)
    return each if first is None else itertools.chain([first], each)


def write_document(results: Iterable[Result | str], out: TextIO) -> int:
    """The export file, standard JSON, written as the results (or their stored JSON) come
    (memory holds one): NaN and infinity written as strings, as the store writes them. Returns
    how many."""
    texts = _primed(results)
    head = {"format": FORMAT, "version": VERSION, "exported_at": datetime.now(UTC).isoformat()}
    before, after = json.dumps(head | {"results": []}, indent=1).rsplit("[]", 1)
    out.write(before)
    count = _json_array(texts, out, close="\n ]")
    out.write(after + "\n")
    return count


def _json_array(items: Iterable[str], out: TextIO, close: str = "\n]") -> int:
    """A JSON array of the items (JSON texts), an item a line, written as they come; returns
    how many."""
    out.write("[")
    count = 0
    for item in items:
        out.write(("\n" if count == 0 else ",\n") + item)
        count += 1
    out.write(close)
    return count


def load(path: Path) -> Iterator[Result]:
    """The results in an export file or an SQLite database, each validated as it is read, one
    held at a time; raises AccelbenchError at the first thing wrong."""
    try:
        if not path.exists():
            raise AccelbenchError(f"cannot read {path} (no such file): {HINT}")
        if not path.is_file():
            raise AccelbenchError(f"{path} is not a file: {HINT}")
        if path.stat().st_size > MAX_IMPORT_BYTES:
            raise AccelbenchError(
                f"{path} is over {MAX_IMPORT_BYTES >> 20} MiB: export fewer results at a time "
                "(--workload, --platform), or as JSON Lines (--format jsonl)"
            )
        with path.open("rb") as f:
            sqlite = f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
        if sqlite:
            yield from _from_sqlite(path)
            return
        with path.open(encoding="utf-8") as text:
            yield from _document(text, str(path))
    except OSError as exc:
        raise AccelbenchError(f"cannot read {path} ({one_line(exc)}): {HINT}") from None


def parse(data: bytes, name: str) -> list[Result]:
    """The results of an export file's bytes; AccelbenchError for anything else."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AccelbenchError(f"{name} is not JSON ({one_line(exc)}): {HINT}") from None
    return list(_document(io.StringIO(text), name))


def _document(text: TextIO, name: str) -> Iterator[Result]:
    """The results of an export document, read a piece at a time and validated one by one as
    its "results" list goes by (its format and version, which accelbench writes first, are
    checked before any); AccelbenchError for anything else."""
    reader, head, seen = Reader(text, _unique, MAX_LINE_BYTES), dict[str, Any](), set[str]()
    try:
        if reader.peek() != "{":
            reader.value()  # JSON at all? (a deep nesting is not)
            raise AccelbenchError(_not_an_export(name))
        reader.take("{")
        more = reader.peek() != "}"
        if not more:
            reader.take("}")
        while more:
            key = reader.value()
            if not isinstance(key, str):
                raise json.JSONDecodeError("expected a key", reader.buf, reader.pos)
            if key in seen:
                raise AccelbenchError(
                    f"{name}: the key {key!r} is given twice in one object: {HINT}"
                )
            seen.add(key)
            reader.take(":")
            if key not in TOP_LEVEL:
                _check_head(head, name)
                raise AccelbenchError(f"{name}: unknown field {key!r} in the export: {HINT}")
            if key == "results":
                _check_head(head, name)
                yield from _results(reader, name)
            else:
                head[key] = reader.value()
            more = reader.take(",}") == ","
        if reader.peek():
            raise json.JSONDecodeError("extra data after the export", reader.buf, reader.pos)
        _check_head(head, name)
        if "results" not in seen:
            raise AccelbenchError(f'{name}: "results" must be a list of results: {HINT}')
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise AccelbenchError(f"{name} is not JSON ({one_line(exc)}): {HINT}") from None
    except ValueError as exc:  # a key given twice in a result, or a value too long
        raise AccelbenchError(f"{name}: {exc}: {HINT}") from None


def _results(reader: Reader, name: str) -> Iterator[Result]:
    """The export's "results" list, each validated as it is read."""
    if reader.peek() != "[":
        raise AccelbenchError(f'{name}: "results" must be a list of results: {HINT}')
    reader.take("[")
    if reader.peek() == "]":
        reader.take("]")
        return
    for index in itertools.count():
        yield _validated(reader.value(), f"result {index}", name)
        if reader.take(",]") == "]":
            return


def _not_an_export(name: str) -> str:
    return f'{name} is not an accelbench export (no "format": "{FORMAT}"): {HINT}'


def _check_head(head: dict[str, Any], name: str) -> None:
    """An export's format and version, as read so far, are this accelbench's to read."""
    if head.get("format") != FORMAT:
        raise AccelbenchError(_not_an_export(name))
    version = head.get("version")
    if type(version) is not int or version < 1:
        raise AccelbenchError(f'{name}: "version" must be a positive whole number: {HINT}')
    if version > VERSION:
        raise AccelbenchError(
            f"{name} was exported by a newer accelbench (format version {version}, this one reads "
            f"{VERSION}): upgrade accelbench"
        )


def _validated(record: object, which: str, name: str) -> Result:
    """One record of an export as a Result, its key checked against its spec and platform."""
    try:
        result = Result.model_validate(record, context=IMPORTED)
    except ValidationError as exc:
        where, why = first_invalid(exc)
        raise AccelbenchError(
            f"{name}: {which}: {where or 'the record'}: {why}; nothing was imported"
        ) from None
    except (AccelbenchError, RecursionError) as exc:  # a validator's own message, or depth
        why = str(exc) if isinstance(exc, AccelbenchError) else one_line(exc)
        raise AccelbenchError(f"{name}: {which}: {why}; nothing was imported") from None
    if result.key != result_key(result.spec, result.env):
        raise AccelbenchError(
            f"{name}: {which}: its key does not match its spec and platform (edited?); "
            "nothing was imported"
        )
    return result


def write_lines(results: Iterable[Result | str], out: TextIO) -> int:
    """The export as JSON Lines, written as the results (or their stored JSON) come: a header
    line, then one result a line, so that neither writing nor importing holds more than one
    result; returns how many."""
    texts = _primed(results)
    header = {"format": FORMAT, "version": VERSION, "exported_at": datetime.now(UTC).isoformat()}
    out.write(json.dumps(header | {"layout": LINES}) + "\n")
    count = 0
    for text in texts:
        out.write(text + "\n")
        count += 1
    return count


def is_lines(path: Path) -> bool:
    """Whether a file is a JSON Lines export (its first line the header)."""
    try:
        with path.open("rb") as f:
            return _is_lines_header(f.readline(MAX_LINE_BYTES))
    except OSError:
        return False  # load() says why it cannot be read


def read_lines(path: Path) -> Iterator[Result]:
    """The results of a JSON Lines export, read and validated one line at a time (no size
    limit); raises AccelbenchError on the first bad line."""
    for number, line in _lines(path):
        yield _line_result(line, number, str(path))


def stored_lines(path: Path, lister: Lister | None, jobs: int) -> Iterator[Row]:
    """read_lines's results as the results table stores them (schema.stored_row), each chunk of
    lines read, validated and listed by one of `jobs` processes, in the file's order, two
    chunks a process in flight at most (memory holds those); raises the first bad line's
    AccelbenchError, as read_lines does."""
    pending: deque[Future[list[Row]]] = deque()
    spawned = multiprocessing.get_context("spawn")  # not a fork of this process's threads
    pool = ProcessPoolExecutor(jobs, mp_context=spawned, initializer=_interrupts_ignored)
    try:
        lines = _lines(path)
        while chunk := list(itertools.islice(lines, IMPORT_CHUNK)):
            pending.append(pool.submit(_stored_chunk, str(path), lister, chunk))
            if len(pending) >= 2 * jobs:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    except BrokenProcessPool:
        raise AccelbenchError(
            f"{path}: a process of --jobs {jobs} ended before its lines were read (out of "
            "memory?); nothing was imported: give fewer --jobs"
        ) from None
    finally:
        pool.shutdown(cancel_futures=True)


IMPORT_CHUNK = 100
"""The lines a process of stored_lines reads, validates and lists at a time."""


def _stored_chunk(
    name: str, lister: Lister | None, chunk: list[tuple[int, bytes | None]]
) -> list[Row]:
    """A chunk of a JSON Lines file's (number, line) as rows of the results table, in a
    process of stored_lines."""
    return [stored_row(_line_result(line, number, name), lister) for number, line in chunk]


def _interrupts_ignored() -> None:
    """Ctrl-C is the importing process's to act on (it undoes the import), not a worker's."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """A JSON Lines export's lines after its header, numbered as an editor numbers them, but
    the blank ones, up to one of over MAX_LINE_BYTES, given as None (_line_result refuses it,
    in its turn)."""
    with path.open("rb") as f:
        f.readline(MAX_LINE_BYTES)
        for number, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 2):
            if len(line) > MAX_LINE_BYTES:
                yield number, None
                return
            if line.strip():
                yield number, line


def _line_result(line: bytes | None, number: int, name: str) -> Result:
    """Line `number` of JSON Lines file `name` as a validated result (None: one too long)."""
    if line is None:
        raise AccelbenchError(
            f"{name}: line {number} is over {MAX_LINE_BYTES >> 20} MiB; nothing was imported"
        )
    try:
        record = _line_value(line)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise AccelbenchError(
            f"{name}: line {number} is not a JSON record ({one_line(exc)}); nothing was imported"
        ) from None
    return _validated(record, f"line {number}", name)


def _line_value(line: bytes) -> Any:
    """A JSON line's value, each object's keys given once: orjson's where exact() reads it (as it
    does every line accelbench writes), else json's, which refuses a key given twice."""
    value = exact(line.rstrip(b"\n"))
    return json.loads(line, object_pairs_hook=_unique) if value is NOT_EXACT else value


def _is_lines_header(line: bytes) -> bool:
    """Whether a file's first line is a JSON Lines export's header (of a version read here)."""
    try:
        head = json.loads(line)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    if not isinstance(head, dict) or head.get("layout") != LINES or head.get("format") != FORMAT:
        return False
    version = head.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        raise AccelbenchError(
            f"a JSON Lines export of format version {version!r}; this accelbench reads 1 to "
            f"{VERSION}: upgrade accelbench"
        )
    return True


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (json keeps the last of a repeated one)."""
    out = dict(pairs)  # built in C; the loop below runs only for a repeated key
    if len(out) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key!r} is given twice in one object")
            seen.add(key)
    return out


def _from_sqlite(path: Path) -> Iterator[Result]:
    """The results of another database, read from a consistent copy (SQLite's backup, safe
    while another process writes to it) opened read-only: the file itself is never written,
    an older schema is read as it is, and a database with no results is refused."""
    from accelbench.storage.store import Store

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
            with Store(copy, writable=False) as store:  # no results table: refused
                yield from store.stream(imported=True)
        except AccelbenchError as exc:
            raise AccelbenchError(str(exc).replace(str(copy), str(path))) from None


def write_json(results: Iterable[Result], out: TextIO) -> int:
    """The full stored records as a JSON list, a record a line as write_texts writes the stored
    ones (NaN and infinity written as strings), written as they come; returns how many."""
    return write_texts(map(stored_json, results), out)


def write_texts(texts: Iterable[str], out: TextIO) -> int:
    """Records' JSON as stored (Store.stream_texts) as a JSON list, a record a line, written
    as they come, none read; returns how many."""
    count = _json_array(texts, out)
    out.write("\n")
    return count


def keep_unsaved(result: Result) -> Path:
    """Write `result` as an export file in accelbench's state directory (else the temporary
    directory) and return its path."""
    state = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    text = dumps([result])
    for folder in (Path(state) / "accelbench" / "unsaved", Path(tempfile.gettempdir())):
        path = folder / f"accelbench-unsaved-{result.key}.json"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            secrets.write_private(path, text)  # a result may name a server: its owner's only
            return path
        except OSError:
            continue
    raise AccelbenchError(f"result {result.key} could be kept nowhere: {text}")
