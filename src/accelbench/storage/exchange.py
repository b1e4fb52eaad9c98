"""Every machine format of results: `accelbench export` writes them as JSON, `accelbench
import` reads such a file, or another accelbench SQLite database, into the store; and the flat
CSV schema of `results --format csv` and `report --format csv`.

A file to import is read whole and every record validated (the same model the store uses) before
anything is written, and then written in one transaction: a malformed or hostile file changes
nothing. A record whose key is stored already is the same cell on the same platform and is
skipped, never overwritten.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import shlex
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from accelbench import scenarios
from accelbench.analysis import scaling, validity
from accelbench.errors import AccelbenchError, first_invalid, one_line
from accelbench.records import contention
from accelbench.records.result import Result, result_key
from accelbench.records.spec import RunSpec
from accelbench.report import inert
from accelbench.report.cells import differing_values
from accelbench.report.results import pair_up

FORMAT = "accelbench-results"
VERSION = 1
SQLITE_HEADER = b"SQLite format 3\x00"
HINT = "give a file made by `accelbench export`, or an accelbench .sqlite database"
MAX_IMPORT_BYTES = 1 << 30
TOP_LEVEL = frozenset({"format", "version", "exported_at", "results"})
LINES = "lines"
"""The header's layout of a JSON Lines export (`export --format jsonl`)."""
MAX_LINE_BYTES = 256 << 20
"""The longest result a JSON Lines import reads (a serve record of many requests is a few MB)."""


def dumps(results: Sequence[Result]) -> str:
    """The export file (write_document's)."""
    buffer = io.StringIO()
    write_document(results, buffer)
    return buffer.getvalue()


def _primed(results: Iterable[Result]) -> Iterator[Result]:
    """The results, the first already read: a database that cannot be read fails before any
    line of an export is written."""
    each = iter(results)
    first = next(each, None)
    return each if first is None else itertools.chain([first], each)


def write_document(results: Iterable[Result], out: TextIO) -> int:
    """The export file, standard JSON, written as the results come (memory holds one): NaN and
    infinity written as strings, as the store writes them. Returns how many."""
    results = _primed(results)
    head = {"format": FORMAT, "version": VERSION, "exported_at": datetime.now(UTC).isoformat()}
    before, after = json.dumps(head | {"results": []}, indent=1).rsplit("[]", 1)
    out.write(before)
    count = _json_array((r.model_dump_json() for r in results), out, close="\n ]")
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


def load(path: Path) -> list[Result]:
    """The results in an export file or an SQLite database, all validated."""
    try:
        if not path.exists():
            raise AccelbenchError(f"cannot read {path} (no such file): {HINT}")
        if not path.is_file():
            raise AccelbenchError(f"{path} is not a file: {HINT}")
        if path.stat().st_size > MAX_IMPORT_BYTES:
            raise AccelbenchError(
                f"{path} is over {MAX_IMPORT_BYTES >> 20} MiB: export fewer results at a time "
                "(--workload, --platform)"
            )
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
        doc = json.loads(data, object_pairs_hook=_unique)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise AccelbenchError(f"{name} is not JSON ({one_line(exc)}): {HINT}") from None
    except ValueError as exc:  # a key given twice
        raise AccelbenchError(f"{name}: {exc}: {HINT}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AccelbenchError(
            f'{name} is not an accelbench export (no "format": "{FORMAT}"): {HINT}'
        )
    unknown = sorted(set(doc) - TOP_LEVEL)
    if unknown:
        raise AccelbenchError(f"{name}: unknown field {unknown[0]!r} in the export: {HINT}")
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
    return [_validated(record, f"result {i}", name) for i, record in enumerate(records)]


def _validated(record: object, which: str, name: str) -> Result:
    """One record of an export as a Result, its key checked against its spec and platform."""
    try:
        result = Result.model_validate(record)
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


def write_lines(results: Iterable[Result], out: TextIO) -> int:
    """The export as JSON Lines, written as the results come: a header line, then one result a
    line, so that neither writing nor importing holds more than one result; returns how many."""
    results = _primed(results)
    header = {"format": FORMAT, "version": VERSION, "exported_at": datetime.now(UTC).isoformat()}
    out.write(json.dumps(header | {"layout": LINES}) + "\n")
    count = 0
    for result in results:
        out.write(result.model_dump_json() + "\n")
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
    with path.open("rb") as f:
        f.readline(MAX_LINE_BYTES)
        for number, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 2):
            if len(line) > MAX_LINE_BYTES:
                raise AccelbenchError(
                    f"{path}: line {number} is over {MAX_LINE_BYTES >> 20} MiB; nothing was imported"
                )
            if not line.strip():
                continue
            try:
                record = json.loads(line, object_pairs_hook=_unique)
            except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise AccelbenchError(
                    f"{path}: line {number} is not a JSON record ({one_line(exc)}); nothing was "
                    "imported"
                ) from None
            yield _validated(record, f"line {number}", str(path))


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
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} is given twice in one object")
        out[key] = value
    return out


def _from_sqlite(path: Path) -> list[Result]:
    """The results of another database, read from a consistent copy (SQLite's backup, safe
    while another process writes to it) opened read-only: the file itself is never written,
    an older schema is read as it is, and a database with no results is refused."""
    from accelbench.storage.store import ResultStore

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
            with ResultStore(copy, writable=False) as store:  # no results table: refused
                return store.query()
        except AccelbenchError as exc:
            raise AccelbenchError(str(exc).replace(str(copy), str(path))) from None


def flat(result: Result) -> dict[str, object]:
    """One row of plain values: the spec, the platform and the headline metrics."""
    spec, m = result.spec, result.metrics
    row: dict[str, object] = {
        "key": result.key,
        "created_at": result.created_at.isoformat(),
        "workload": spec.workload,
        "model_args": json.dumps(spec.model_args) if spec.model_args else None,
        "data": spec.data,
        "scenario": spec.scenario,
        "platform": result.platform,
        "device_model": result.device_model,
        "device_type": result.env.device_type,
        "hostname": result.env.hostname,
        "replicas": spec.replicas,
        "nodes": spec.nodes,
        "micro_batch": spec.batch_size,
        "grad_accum": spec.grad_accum,
        "global_batch": spec.global_batch,
        "precision": spec.precision,
        "compile": spec.compile,
        "channels_last": spec.channels_last,
        "workers": spec.workers,
        "repeat": spec.repeat,
        "status": result.status,
        "reason": result.reason,
        "wall_s": result.wall_s,
        "overhead_s": result.overhead_s,
        "tags": json.dumps(result.tags) if result.tags else None,
        "command": shlex.join(result.argv) if result.argv else None,
    }
    if m is not None:
        w, s, ci = m.window_items_per_s, m.step_ms_steady, result.items_per_s_ci
        headline = result.headline
        row |= {
            "item_unit": m.item_unit,
            "items_per_s": result.items_per_s,
            "headline_unit": headline.unit if headline else None,
            "items_per_s_ci_low": ci[0] if ci else None,
            "items_per_s_ci_high": ci[1] if ci else None,
            "steady_items": m.delivered.num_items,
            "steady_s": m.delivered.time_s,
            "window_items_per_s_median": w.median,
            "window_items_per_s_p25": w.p25,
            "window_items_per_s_p75": w.p75,
            "num_windows": w.n,
            # No CPU figure from a window shorter than CPU times can resolve.
            "others_cpus": m.host.others_cpus
            if m.host and m.host.window_s >= contention.MIN_WINDOW_S
            else None,
            "load_avg_start": m.host.load_avg_start if m.host else None,
            "ci_met": m.ci_met,
            "verdict": validity.verdict_text(result),
            "flops_per_item": m.flops.per_item if m.flops else None,
            "mfu": m.mfu,
            "mfu_peak_source": m.flops.peak_source if m.flops else None,
            "energy_method": m.energy.method if m.energy else None,
            "joules_per_item": m.joules_per_item,
            "avg_power_w": m.energy.avg_power_w if m.energy else None,
            "compute_items_per_s": m.compute_items_per_s,
            "input_wait_frac": m.input_wait_frac,
            "step_ms_median": s.median,
            "step_ms_p90": s.p90,
            "step_ms_p99": s.p99,
            "num_steady_steps": s.n,
            "first_step_ms": m.first_step_ms,
            "first_epoch_s": m.epochs[0].time_s,
            "last_epoch_s": m.epochs[-1].time_s,
            "loss_last": m.epochs[-1].loss_last,
            "diverged_at_step": m.diverged_at_step,
            "peak_mem_allocated_gib": m.peak_mem_allocated_gib,
            "host_peak_rss_gib": m.host_peak_rss_gib,
            "timer": m.timer,
        }
        row |= scenarios.get(spec.scenario).columns(result)
    return row


def to_csv(results: Sequence[Result]) -> str:
    """write_csv's CSV, as text."""
    buffer = io.StringIO()
    write_csv(results, buffer)
    return buffer.getvalue()


def write_csv(results: Iterable[Result], out: TextIO) -> int:
    """flat() rows with the speed-ups, and a column for every other spec field whose value
    differs among the results (threads, tensor_parallel, epochs, ...): rows that ran
    differently never read the same. The columns are known only when every result has been
    seen, so each flat row and spec waits in a temporary file, not in memory. Returns how many."""
    scales: list[scaling.Scale] = []
    columns: dict[str, None] = {}
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        for r in results:
            row = flat(r)
            columns |= dict.fromkeys(row)
            spool.write(json.dumps([row, r.spec.model_dump(mode="json")]) + "\n")
            scales.append(scaling.scale(r))
        found = {id(p.row): p for p in pair_up(scales) if p.speedup is not None}
        speedups = [found.get(id(s)) for s in scales]
        del scales, found
        spool.seek(0)
        names = [n for n in RunSpec.model_fields if n not in RENAMED]
        knobs = differing_values(names, (json.loads(line)[1] for line in spool))
        added = ["speedup", "scaling_efficiency", *(k for k in knobs if k not in columns)]
        writer = csv.DictWriter(out, fieldnames=[*columns, *added], lineterminator="\n")
        writer.writeheader()
        spool.seek(0)
        for line, pair in zip(spool, speedups, strict=True):
            row, spec = json.loads(line)
            row |= {
                "speedup": pair.speedup if pair else None,
                "scaling_efficiency": pair.efficiency if pair else None,
            }
            row |= {k: _cell(spec[k]) for k in knobs if k not in row}
            writer.writerow({k: inert.csv_cell(v) for k, v in row.items()})
    return len(speedups)


RENAMED = ("batch_size", "device", "platform")
"""Spec fields flat() gives under other names (micro_batch, device_type, platform)."""


def _cell(value: object) -> object:
    return json.dumps(value) if isinstance(value, dict | list) else value


def rows_csv(rows: Sequence[dict[str, object]]) -> str:
    """CSV of plain rows, with every column any row has; no cell can run as a formula in a
    spreadsheet (report.inert.csv_cell)."""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: inert.csv_cell(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()


def to_json(results: Sequence[Result]) -> str:
    """The full stored records, as a JSON list (NaN and infinity written as strings)."""
    buffer = io.StringIO()
    write_json(results, buffer)
    return buffer.getvalue()


def write_json(results: Iterable[Result], out: TextIO) -> int:
    """to_json written as the results come, a record at a time; returns how many."""
    count = _json_array((r.model_dump_json(indent=2) for r in results), out)
    out.write("\n")
    return count
