"""Moving results between machines: export, import of JSON and of another database, and
files that must change nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result
from accelbench.report.database import ResultStore
from accelbench.storage import exchange, json_stream

from ..conftest import SIM_PLATFORM, on_a_terminal, tiny
from .test_store import _schema_1_database

runner = CliRunner()


def keys(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [k for (k,) in db.execute("SELECT key FROM results ORDER BY key")]


def test_export_then_import_gives_the_same_records(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    there, here = tmp_path / "there.sqlite", tmp_path / "here.sqlite"
    with ResultStore(there) as store:
        for r in two_platforms:
            store.put(r)
    out = tmp_path / "there.json"
    assert runner.invoke(app, ["export", "--db", str(there), "--out", str(out)]).exit_code == 0
    done = runner.invoke(app, ["import", str(out), "--db", str(here)])
    assert done.exit_code == 0, done.output
    assert f"imported {len(two_platforms)} new results" in done.output
    with ResultStore(here) as store:
        assert sorted(store.query(), key=lambda r: r.key) == sorted(
            two_platforms, key=lambda r: r.key
        )
    again = runner.invoke(app, ["import", str(out), str(there), "--db", str(here)])
    assert (
        f"imported 0 new results into {here}; {2 * len(two_platforms)} were stored" in again.output
    )


def test_an_import_makes_rows_only_for_what_is_not_stored(
    two_platforms: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's whole export imported again, or a result twice in one file: each key's listing
    and flat row made once, when it is first stored (they are most of a record's import)."""
    from accelbench.report import database

    made: list[str] = []

    def counted(result: Result) -> tuple[str, str]:
        made.append(result.key)
        return real(result)

    real = database.stored_texts
    monkeypatch.setattr(database, "stored_texts", counted)
    twice = tmp_path / "twice.jsonl"
    with twice.open("w") as f:
        exchange.write_lines([*two_platforms, *two_platforms], f)
    db = tmp_path / "here.sqlite"
    done = runner.invoke(app, ["import", str(twice), "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert f"{len(two_platforms)} were stored already" in done.output
    again = runner.invoke(app, ["import", str(twice), "--db", str(db)])
    assert f"imported 0 new results into {db}" in again.output
    assert sorted(made) == sorted(r.key for r in two_platforms)
    assert keys(db) == sorted(made)


def test_a_diverged_result_exports_as_standard_json() -> None:
    from accelbench.cell.runner import run

    diverged = run(tiny(lr=1e9, steps_per_epoch=5))
    assert diverged.status == "diverged"

    def not_standard(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON: jq and browsers reject it")

    text = exchange.dumps([diverged])
    json.loads(text, parse_constant=not_standard)
    [back] = exchange.parse(text.encode(), "export.json")
    assert back.model_dump_json() == diverged.model_dump_json()  # NaN != NaN: compare the text


def test_duplicates_keep_the_stored_record(two_platforms: list[Result], tmp_path: Path) -> None:
    db = tmp_path / "here.sqlite"
    first = two_platforms[0]
    with ResultStore(db) as store:
        store.put(first)
        edited = first.model_copy(update={"reason": "from elsewhere"})
        assert store.add([edited, two_platforms[1]]) == 1
        assert store.get(first.key) == first


def test_an_older_database_is_merged_and_left_as_it_was(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    old, here = tmp_path / "old.sqlite", tmp_path / "here.sqlite"
    _schema_1_database(old, two_platforms[0])
    before = old.read_bytes()
    assert runner.invoke(app, ["import", str(old), "--db", str(here)]).exit_code == 0
    assert keys(here) == [two_platforms[0].key]
    assert old.read_bytes() == before and not list(tmp_path.glob("old.sqlite.*"))


def export_doc(results: list[Result]) -> dict[str, object]:
    return json.loads(exchange.dumps(results))


def bad_files(results: list[Result]) -> dict[str, tuple[bytes, str]]:
    """Each malformed or hostile file, and what its error says."""
    doc = export_doc(results)
    broken = json.loads(json.dumps(doc))
    broken["results"][-1]["spec"]["batch_size"] = -3  # the last record: nothing may be stored
    unknown = json.loads(json.dumps(doc))
    unknown["results"][0]["spec"]["workload"] = "no such thing"
    extra = json.loads(json.dumps(doc))
    extra["results"][0]["env"]["rootkit"] = "yes"
    edited = json.loads(json.dumps(doc))
    edited["results"][0]["spec"]["batch_size"] += 1  # a faster-looking cell under the old key
    negative = json.loads(json.dumps(doc))
    negative["results"][0]["metrics"]["delivered"]["items_per_s"] = -5.0
    return {
        "not json": (b"\x00\xff garbage", "is not JSON"),
        "other json": (b'{"rows": []}', "is not an accelbench export"),
        "newer": (json.dumps(doc | {"version": 99}).encode(), "newer accelbench"),
        "no list": (json.dumps(doc | {"results": {}}).encode(), '"results" must be a list'),
        "bad last record": (
            json.dumps(broken).encode(),
            f"result {len(results) - 1}: spec.batch_size",
        ),
        "unknown workload": (json.dumps(unknown).encode(), "result 0: unknown workload"),
        "extra field": (json.dumps(extra).encode(), "result 0: env.rootkit: Extra inputs"),
        "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "is not JSON"),
        "negative rate": (json.dumps(negative).encode(), "result 0: metrics.delivered.items_per_s"),
        "unknown field": (json.dumps(doc | {"rootkit": 1}).encode(), "unknown field 'rootkit'"),
        "twice": (b'{"format": "x", "format": "accelbench-results"}', "'format' is given twice"),
        "twice in a result": (  # on a result's own line, as an export writes it
            exchange.dumps(results).replace('\n{"key"', '\n{"status":"ok","key"', 1).encode(),
            "'status' is given twice",
        ),
        "edited key": (json.dumps(edited).encode(), "result 0: its key does not match"),
        "trailing brace": (json.dumps(doc).encode() + b"}", "is not JSON"),
    }


def test_a_bad_file_changes_nothing(two_platforms: list[Result], tmp_path: Path) -> None:
    db = tmp_path / "here.sqlite"
    with ResultStore(db) as store:
        store.put(two_platforms[0])
    before = keys(db)
    for name, (data, message) in bad_files(two_platforms).items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        done = runner.invoke(app, ["import", str(path), "--db", str(db)])
        assert done.exit_code == 2, name
        (line,) = done.output.strip().splitlines()
        assert line.startswith("error: ") and message in line, (name, line)
        assert keys(db) == before, name


def test_hostile_names_import_as_data(two_platforms: list[Result]) -> None:
    named = [r for r in two_platforms if SIM_PLATFORM in r.env.platform]
    assert exchange.parse(exchange.dumps(named).encode(), "x") == named


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AccelbenchError, match=r"cannot read .*nothing\.json"):
        list(exchange.load(tmp_path / "nothing.json"))


def test_an_export_is_read_a_result_at_a_time(
    two_platforms: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pieces of 7 characters: every value spans pieces, numbers and strings cut anywhere.
    monkeypatch.setattr(json_stream, "PIECE_CHARS", 7)
    path = tmp_path / "export.json"
    path.write_text(exchange.dumps(two_platforms))
    assert list(exchange.load(path)) == two_platforms
    # The first result comes before the second is read: a broken second one is found only
    # after it (the import's transaction then stores neither), so memory holds one result.
    doc = json.loads(path.read_text())
    doc["results"][1]["spec"]["batch_size"] = -3
    path.write_text(json.dumps(doc, indent=1))
    results = exchange.load(path)
    assert next(results) == two_platforms[0]
    with pytest.raises(AccelbenchError, match=r"result 1: spec\.batch_size"):
        next(results)


def test_imported_times_without_a_zone_and_zero_rates_leave_every_reader_working(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    records: list[dict[str, Any]] = export_doc([r for r in two_platforms if r.metrics])["results"]  # type: ignore[assignment]
    records[0]["created_at"] = "2026-01-02T03:04:05"  # no zone
    records[1]["metrics"]["delivered"] |= {"items_per_s": 0.0, "ci_low": None, "ci_high": None}
    doc = {"format": exchange.FORMAT, "version": exchange.VERSION, "results": records}
    path, db = tmp_path / "odd.json", tmp_path / "r.sqlite"
    path.write_text(json.dumps(doc))
    assert runner.invoke(app, ["import", str(path), "--db", str(db)]).exit_code == 0
    for command in (
        ["export"],
        ["results"],
        ["report", "--format", "md"],
        ["compare", "--by", "batch_size"],
        ["compare", "--by", "platform"],
        ["recommend", "tiny_mlp"],
    ):
        done = runner.invoke(app, [*command, "--db", str(db)])
        assert done.exit_code == 0, (command, done.output)


def test_another_applications_database_is_refused_not_imported_as_nothing(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (name TEXT)")
    db.close()
    done = runner.invoke(app, ["import", str(other), "--db", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2 and "is not an accelbench database (users)" in done.output


def test_json_lines_round_trip_a_result_at_a_time(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    there, here = tmp_path / "there.sqlite", tmp_path / "here.sqlite"
    with ResultStore(there) as store:
        store.add(two_platforms)
    out = tmp_path / "there.jsonl"
    args = ["export", "--format", "jsonl", "--db", str(there)]
    written = runner.invoke(app, [*args, "--out", str(out)])
    assert written.exit_code == 0 and f"wrote {len(two_platforms)} results" in written.output
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == exchange.FORMAT and header["layout"] == exchange.LINES
    assert len(lines) == 1 + len(two_platforms)  # a result a line
    with ResultStore(there) as store:
        listed = [r.key for r in store.query()]
    assert [json.loads(line)["key"] for line in lines[1:]] == listed  # in `results`' order
    printed = runner.invoke(app, args).stdout.splitlines()
    assert printed[1:] == lines[1:] and json.loads(printed[0])["layout"] == exchange.LINES
    done = runner.invoke(app, ["import", str(out), "--db", str(here)])
    assert done.exit_code == 0, done.output
    assert f"imported {len(two_platforms)} new results" in done.output
    with ResultStore(here) as store:
        assert sorted(store.query(), key=lambda r: r.key) == sorted(
            two_platforms, key=lambda r: r.key
        )


def every_and_first(results: list[Result], tmp_path: Path) -> tuple[Path, Path]:
    """A database of every result, and one of the first alone."""
    every, first = tmp_path / "every.sqlite", tmp_path / "first.sqlite"
    with ResultStore(every) as store:
        store.add(results)
    with ResultStore(first) as store:
        store.put(results[0])
    return every, first


def exported_lines(db: Path, out: Path) -> Path:
    """The database's JSON Lines export, at `out`."""
    done = runner.invoke(app, ["export", "--format", "jsonl", "--db", str(db), "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out


def test_a_bad_line_of_a_json_lines_import_changes_nothing(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    there, here = every_and_first(two_platforms, tmp_path)
    out = exported_lines(there, tmp_path / "there.jsonl")
    lines = out.read_text().splitlines()
    edited = json.loads(lines[2]) | {"status": "fine"}
    out.write_text("\n".join([*lines[:2], json.dumps(edited), *lines[3:]]) + "\n")
    before = keys(here)
    done = runner.invoke(app, ["import", str(out), "--db", str(here)])
    assert done.exit_code == 2
    assert f"{out}: line 3: status: Input should be" in done.output
    assert "nothing was imported" in done.output
    assert keys(here) == before  # the first line's result was written, then undone
    out.write_text("\n".join([*lines[:2], "{not json", *lines[3:]]) + "\n")
    done = runner.invoke(app, ["import", str(out), "--db", str(here)])
    assert done.exit_code == 2 and "line 3 is not a JSON record" in done.output
    assert keys(here) == before


def test_a_json_lines_line_is_read_as_json_reads_it(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    """A line that accelbench did not write (another spacing, json's NaN) imports as one that
    it did, and a line with a key given twice is refused, though the quicker reader (orjson)
    would keep the last."""
    there, _ = every_and_first(two_platforms, tmp_path)
    lines = exported_lines(there, tmp_path / "there.jsonl").read_text().splitlines()
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("\n".join([lines[0], *(json.dumps(json.loads(x)) for x in lines[1:])]))
    done = runner.invoke(app, ["import", str(spaced), "--db", str(tmp_path / "spaced.sqlite")])
    assert done.exit_code == 0, done.output
    assert keys(tmp_path / "spaced.sqlite") == keys(there)
    record = json.loads(lines[2])
    record["metrics"]["epochs"][0]["loss_last"] = float("nan")
    assert "NaN" in json.dumps(record)  # json's own, not standard JSON: orjson refuses it
    twice = '{"status":"ok",' + lines[2][1:]
    for name, line, expected in (("nan", json.dumps(record), 0), ("twice", twice, 2)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join([lines[0], line]) + "\n")
        done = runner.invoke(app, ["import", str(path), "--db", str(tmp_path / f"{name}.sqlite")])
        assert done.exit_code == expected, (name, done.output)
    assert "line 2 is not a JSON record" in done.output
    assert "the key 'status' is given twice" in done.output


def test_an_import_in_several_processes_stores_what_one_does(
    two_platforms: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--jobs: the rows one process stores, in its order, and a bad line among the last is
    named and undoes the whole import as it does in one process."""
    monkeypatch.setattr(exchange, "IMPORT_CHUNK", 2)  # several chunks in flight at once
    there, here = every_and_first(two_platforms, tmp_path)
    out = exported_lines(there, tmp_path / "there.jsonl")
    stored = {}
    for jobs in ("1", "2"):
        db = tmp_path / f"{jobs}.sqlite"
        done = runner.invoke(app, ["import", str(out), "--db", str(db), "--jobs", jobs])
        assert done.exit_code == 0, done.output
        assert f"imported {len(two_platforms)} new results" in done.output
        with sqlite3.connect(db) as rows:
            stored[jobs] = rows.execute("SELECT * FROM results ORDER BY rowid").fetchall()
    assert stored["2"] == stored["1"]
    lines = out.read_text().splitlines()
    edited = json.loads(lines[-2]) | {"status": "fine"}
    out.write_text("\n".join([*lines[:-2], json.dumps(edited), lines[-1]]) + "\n")
    before = keys(here)
    done = runner.invoke(app, ["import", str(out), "--db", str(here), "--jobs", "2"])
    assert done.exit_code == 2
    assert f"line {len(lines) - 1}: status: Input should be" in done.output
    assert keys(here) == before


def _dies(result: Result) -> tuple[str, str]:
    """A lister whose process ends at once, as one the kernel killed for its memory does."""
    os._exit(1)


def test_a_process_of_jobs_that_dies_is_one_line(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    there, _ = every_and_first(two_platforms, tmp_path)
    out = exported_lines(there, tmp_path / "there.jsonl")
    with pytest.raises(AccelbenchError, match=r"a process of --jobs 2 ended .* fewer --jobs"):
        list(exchange.stored_lines(out, _dies, 2))


def test_a_line_too_long_is_refused_in_its_turn(
    two_platforms: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line over MAX_LINE_BYTES is refused, but a bad line before it is the one named, in one
    process or several."""
    monkeypatch.setattr(exchange, "MAX_LINE_BYTES", 64 << 10)
    there, here = every_and_first(two_platforms, tmp_path)
    header, first, second, *_ = (
        exported_lines(there, tmp_path / "there.jsonl").read_text().split("\n")
    )
    long = second + " " * (64 << 10)  # JSON still, but longer than an import reads
    bad = json.dumps(json.loads(first) | {"status": "fine"})
    before = keys(here)
    out = tmp_path / "long.jsonl"
    for jobs in ("1", "2"):
        for lines, named in (([first, long], "line 3 is over"), ([bad, long], "line 2: status")):
            out.write_text("\n".join([header, *lines]) + "\n")
            done = runner.invoke(app, ["import", str(out), "--db", str(here), "--jobs", jobs])
            assert done.exit_code == 2 and named in done.output, (jobs, done.output)
            assert keys(here) == before


def test_json_lines_export_of_several_databases_counts_a_result_once(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    a, b = every_and_first(two_platforms, tmp_path)
    done = runner.invoke(app, ["export", "--format", "jsonl", "--db", str(a), "--db", str(b)])
    assert done.exit_code == 0, done.output
    found = [json.loads(line)["key"] for line in done.stdout.splitlines()[1:]]
    assert sorted(found) == sorted(r.key for r in two_platforms)


def test_an_import_counts_what_it_has_read_on_a_terminal_only(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    there, _ = every_and_first(two_platforms, tmp_path)
    out = exported_lines(there, tmp_path / "there.jsonl")
    command = [sys.executable, "-m", "accelbench", "import", str(out)]
    code, shown = on_a_terminal([*command, "--db", str(tmp_path / "shown.sqlite")])
    assert code == 0 and f"imported {len(two_platforms)} new results" in shown
    assert "results read" in shown
    piped = subprocess.run(
        [*command, "--db", str(tmp_path / "piped.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0 and f"imported {len(two_platforms)} new" in piped.stdout
    assert "results read" not in piped.stdout + piped.stderr
