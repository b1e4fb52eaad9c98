"""The database as the commands read it: compare's cells from listings are the cells its
records give, matched on the same text, so that a row read from its record joins its cell."""

from __future__ import annotations

import csv
import io
import sqlite3
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from accelbench.analysis import comparison
from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report import tabular
from accelbench.report.database import ResultStore, compared
from accelbench.storage import schema


def _cells(cells: comparison.Cells) -> dict[tuple[str, str, str], list[comparison.Point]]:
    """Cells keyed by what names each configuration."""
    out: dict[tuple[str, str, str], list[comparison.Point]] = {}
    for cell in cells.values():
        for value, runs in cell.items():
            named = (runs.first.spec.model_dump_json(), runs.first.platform, value)
            out[named] = runs.points
    return out


@pytest.mark.parametrize("by", ["platform", "batch_size", "scenario", "replicas", "epochs"])
def test_compare_reads_from_listings_what_the_records_give(
    two_platforms: list[Result], tmp_path: Path, by: str
) -> None:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add(two_platforms)
    ok = [r for r in two_platforms if r.status == "ok"]
    with pytest.MonkeyPatch.context() as patch:  # nor any record read
        patch.setattr(schema, "record", lambda *_: pytest.fail("a record was read"))
        found = compared([db], by)
    expected = comparison.grouped(ok, by)
    assert _cells(found) == _cells(expected)
    assert found.keys() == expected.keys()  # the matched texts too


def test_a_row_listed_by_other_code_and_an_older_schema_are_read_as_records(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add(two_platforms)
    ok = [r for r in two_platforms if r.status == "ok"]
    expected = _cells(comparison.grouped(ok, "platform"))
    with sqlite3.connect(db) as con:  # one row as another accelbench listed it
        con.execute("UPDATE results SET listing = '[]' WHERE key = ?", (ok[0].key,))
    con.close()
    mixed = compared([db], "platform")
    assert _cells(mixed) == expected
    assert mixed.keys() == comparison.grouped(ok, "platform").keys()  # it joined its cell
    with sqlite3.connect(db) as con:  # a schema before: read as it is, from its records
        con.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION - 1}")
    con.close()
    assert _cells(compared([db], "platform")) == expected


def test_a_result_in_two_databases_is_compared_once(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with ResultStore(a) as store:
        store.add(two_platforms)
    with ResultStore(b) as store:
        store.add(two_platforms[:3])
    assert _cells(compared([a, b], "batch_size")) == _cells(compared([a], "batch_size"))


def test_the_csv_is_made_from_stored_flat_rows_as_from_the_records(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    """A site's 100,000 records took 42 s of CPU to validate and flatten for a CSV; the stored
    flat rows and listings give the same CSV without reading one, but a row older code made,
    which is made again from its record."""
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add(two_platforms)
        records = store.query()
    expected = tabular.to_csv(records)
    assert "speedup" in expected.splitlines()[0]  # the replicas' pair is in it
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema, "record", lambda *_: pytest.fail("a record was read"))
        for command in (["results", "--format", "csv"], ["report", "--format", "csv"]):
            done = CliRunner().invoke(app, [*command, "--db", str(db)])
            assert done.exit_code == 0, done.output
            assert done.stdout == expected
        newest = CliRunner().invoke(
            app, ["results", "--format", "csv", "--limit", "2", "--db", str(db)]
        )
        assert newest.stdout == tabular.to_csv(records[-2:])
    with sqlite3.connect(db) as con:  # one row as another accelbench left it
        con.execute("UPDATE results SET flat = NULL WHERE key = ?", (records[0].key,))
    con.close()
    done = CliRunner().invoke(app, ["results", "--format", "csv", "--db", str(db)])
    assert done.stdout == expected


def test_a_nan_or_an_infinity_is_stored_in_a_flat_row_as_the_text_its_csv_shows(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    """A flat row is written by orjson, which would write a diverged loss (NaN) as null: each
    cell is the text the CSV writes of it, as it wrote the float."""
    m = two_platforms[0].metrics
    assert m is not None
    epochs = [*m.epochs[:-1], m.epochs[-1].model_copy(update={"loss_last": float("nan")})]
    diverged = two_platforms[0].model_copy(
        update={
            "status": "diverged",
            "reason": "the loss became NaN",
            "metrics": m.model_copy(update={"epochs": epochs, "input_wait_frac": float("inf")}),
        }
    )
    row = orjson.loads(tabular.flat_text(diverged))  # standard JSON
    assert (row["loss_last"], row["input_wait_frac"]) == ("nan", "inf")
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add([diverged])
    done = CliRunner().invoke(app, ["results", "--format", "csv", "--db", str(db)])
    header, line = list(csv.reader(io.StringIO(done.stdout)))
    cells = dict(zip(header, line, strict=True))
    assert (cells["loss_last"], cells["input_wait_frac"]) == ("nan", "inf")  # as csv writes them
