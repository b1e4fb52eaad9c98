from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from accelbench.cell.environment import capture
from accelbench.cell.runner import run
from accelbench.errors import AccelbenchError
from accelbench.records.environment import Environment
from accelbench.records.result import Result
from accelbench.report import listing
from accelbench.report.database import ResultStore
from accelbench.scenarios.time_to_train import TimeToTrain
from accelbench.storage import connect, schema
from accelbench.storage import store as store_module
from accelbench.storage.connect import default_path
from accelbench.storage.schema import MIGRATIONS, SCHEMA_VERSION

from ..conftest import records_read, tiny


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny())


@pytest.fixture(scope="module")
def env() -> Environment:
    return capture("cpu")


def failed(env: Environment, **spec: object) -> Result:
    return Result.new(tiny(**spec), env, "oom", reason="OutOfMemoryError: x")


def rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT key, workload, status, micro_batch, items_per_s FROM results"
        ).fetchall()


def test_put_get_and_query_columns(db_path: Path, measured: Result) -> None:
    store = ResultStore(db_path)
    store.put(measured)
    assert store.get(measured.key) == measured
    assert store.get(measured.key) is not None and store.get("nope") is None
    [(key, workload, status, batch, rate)] = rows(db_path)
    assert (key, workload, status, batch) == (measured.key, "tiny_mlp", "ok", 4)
    assert rate == pytest.approx(measured.items_per_s)


def test_put_is_an_idempotent_upsert(db_path: Path, measured: Result) -> None:
    store = ResultStore(db_path)
    store.put(measured)
    newer = measured.model_copy(update={"status": "error", "reason": "again"})
    store.put(newer)
    assert len(rows(db_path)) == 1
    assert store.get(measured.key) == newer


def test_query_filters(db_path: Path, measured: Result, env: Environment) -> None:
    store = ResultStore(db_path)
    store.put(measured)
    store.put(failed(env, batch_size=2))
    assert len(store.query()) == 2
    assert [r.status for r in store.query(status="oom")] == ["oom"]
    assert len(store.query(platform=env.platform[:4])) == 2
    assert store.query(platform="A100") == []
    assert store.query(workload="resnet50") == []
    assert len(store.query(limit=1)) == 1


def test_schema_version_is_recorded(db_path: Path) -> None:
    ResultStore(db_path).close()
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_newer_schema_is_refused_and_left_alone(db_path: Path, measured: Result) -> None:
    ResultStore(db_path).put(measured)
    with sqlite3.connect(db_path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = db_path.read_bytes()
    with pytest.raises(AccelbenchError, match="newer than this accelbench"):
        ResultStore(db_path)
    assert db_path.read_bytes() == before


def _schema_1_database(path: Path, record: Result) -> None:
    """A database as accelbench 0.1.0 wrote it: schema 1, one result."""
    old_columns = [c for c in schema.COLUMNS if c not in ("time_to_target_s", "listing", "flat")]
    row = dict(zip(schema.COLUMNS, schema.row(record, None, None), strict=True))
    with sqlite3.connect(path) as db:
        for statement in schema.statements(0, schema.SQLITE):
            db.execute(statement)
        db.execute(
            f"INSERT INTO results ({', '.join(old_columns)}) VALUES ({', '.join('?' * len(old_columns))})",
            [row[c] for c in old_columns],
        )
        db.execute("PRAGMA user_version = 1")


def test_an_older_database_is_migrated_in_place_with_a_backup(
    db_path: Path, measured: Result, caplog: pytest.LogCaptureFixture
) -> None:
    assert measured.metrics is not None
    reached = TimeToTrain(
        target="val_loss<=1",
        outcome="reached",
        reason="r",
        time_to_target_s=12.5,
        steps_to_target=8,
        items_to_target=32,
        passes_to_target=1.0,
        train_s=12.5,
        eval_s=1.0,
        num_train_items=32,
        num_held_out_items=8,
        lr=0.01,
        lr_rule="fixed 0.01",
        max_loss=2.0,
        max_loss_step=0,
        curve=[],
    )
    record = measured.model_copy(
        update={"metrics": measured.metrics.model_copy(update={"record": reached})}
    )
    _schema_1_database(db_path, record)
    with ResultStore(db_path) as store:
        assert store.get(record.key) == record
        assert store.listings() == [listing.of(record)]
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT time_to_target_s FROM results").fetchall() == [(12.5,)]
        stored = db.execute("SELECT listing FROM results").fetchall()
        assert stored == [(listing.of(record).dumps(),)]  # made by the migration
    backup = db_path.with_name(db_path.name + ".schema1.bak")
    with sqlite3.connect(backup) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        assert db.execute("SELECT key FROM results").fetchall() == [(record.key,)]
    assert str(backup) in caplog.text


def test_a_new_listing_version_lists_an_upgraded_database_once(
    db_path: Path,
    measured: Result,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert schema.LISTING_VERSION == listing.VERSION  # a new VERSION comes with a RELIST
    assert MIGRATIONS[-1] is schema.RELIST
    with ResultStore(db_path) as store:
        store.put(measured)
    names = list(listing.Listing._fields)
    with sqlite3.connect(db_path) as db:  # as the accelbench before wrote it
        (text,) = db.execute("SELECT listing FROM results").fetchone()
        older = json.loads(text)
        older[names.index("version")] = listing.VERSION - 1
        db.execute("UPDATE results SET listing = ?", (json.dumps(older),))
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    read = records_read(monkeypatch)
    with ResultStore(db_path, writable=False) as store:  # reads as it is: made from the record
        assert store.listings() == [listing.of(measured)] and read == [measured.key]
    assert "from an earlier accelbench" in caplog.text  # the reader is told why it is slow
    caplog.clear()
    with ResultStore(db_path) as store:  # the first writable open lists it again
        assert store.listings() == [listing.of(measured)] and read == [measured.key]
    with ResultStore(db_path, writable=False) as store:
        assert store.listings() == [listing.of(measured)] and read == [measured.key]
    assert "earlier accelbench" not in caplog.text
    assert not list(db_path.parent.glob("*.bak"))  # no record changed: no copy kept


def test_a_failing_migration_changes_nothing(
    db_path: Path, measured: Result, monkeypatch: pytest.MonkeyPatch
) -> None:
    _schema_1_database(db_path, measured)
    monkeypatch.setattr(schema, "MIGRATIONS", [*MIGRATIONS, "ALTER TABLE nowhere ADD x"])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(MIGRATIONS) + 1)
    with pytest.raises(AccelbenchError, match="not a usable accelbench database"):
        ResultStore(db_path)
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        columns = [c[1] for c in db.execute("PRAGMA table_info(results)")]
    assert "time_to_target_s" not in columns  # the migration before the failing one rolled back too


def test_a_network_file_system_is_warned_about(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert connect.file_system(db_path) is not None  # this machine's own, whatever it is
    monkeypatch.setattr(connect, "file_system", lambda path: "nfs4")
    ResultStore(db_path).close()
    assert "network file system" in caplog.text and "nfs4" in caplog.text


def test_corrupt_file_is_refused_and_left_alone(db_path: Path) -> None:
    db_path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(AccelbenchError, match="not a usable accelbench database"):
        ResultStore(db_path)
    assert db_path.read_bytes() == b"this is not sqlite" * 100


def test_unwritable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AccelbenchError, match="pass --db with a writable path"):
        ResultStore(blocker / "results.sqlite")


def test_reading_a_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AccelbenchError, match="no results database"):
        ResultStore(tmp_path / "missing.sqlite", writable=False)
    assert not (tmp_path / "missing.sqlite").exists()


def test_default_path_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "x.sqlite"))
    assert default_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("ACCELBENCH_DB")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "accelbench" / "results.sqlite"


def test_schema_2_rows_are_rewritten_with_the_delivered_rate_and_every_device(
    db_path: Path, measured: Result
) -> None:
    """A record as schema 2 stored it: no delivered rate (its items_per_s column held the median
    window), a CPU peak measured per cell, and a two-stage pipeline stored as one device."""
    assert measured.metrics is not None and measured.metrics.flops is not None
    old = measured.model_dump(mode="json")
    del old["metrics"]["delivered"], old["metrics"]["host"]
    old["metrics"]["flops"] |= {"peak_per_s": 3e10, "peak_source": "measured: best 1024x1024"}
    old["spec"] |= {"pipeline_stages": 2, "grad_accum": 2}
    columns = dict(zip(schema.COLUMNS, schema.row(measured, None, None), strict=True))
    columns |= {"num_devices": 1, "items_per_s": measured.metrics.window_items_per_s.median}
    columns |= {"record": json.dumps(old)}
    del columns["listing"], columns["flat"]  # schema 5's and 12's
    with sqlite3.connect(db_path) as db:
        for migration in range(2):
            for statement in schema.statements(migration, schema.SQLITE):
                db.execute(statement)
        db.execute(
            f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            list(columns.values()),
        )
        db.execute("PRAGMA user_version = 2")
    with ResultStore(db_path) as store:
        [upgraded] = store.query()
    assert upgraded.metrics is not None and upgraded.metrics.flops is not None
    assert upgraded.metrics.delivered == measured.metrics.delivered  # from its step and epoch times
    assert upgraded.metrics.flops.peak_per_s is None and upgraded.metrics.mfu is None
    with sqlite3.connect(db_path) as db:
        [(rate, devices)] = db.execute("SELECT items_per_s, num_devices FROM results").fetchall()
        stored = json.loads(db.execute("SELECT record FROM results").fetchone()[0])
    assert rate == pytest.approx(measured.metrics.delivered.items_per_s)
    assert devices == 2 == upgraded.num_devices
    assert stored["metrics"]["delivered"]["num_items"] == measured.metrics.delivered.num_items


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://bench@127.0.0.1:1/results2?password=Hunter2:@/Secret",
        "postgresql://bench:Hunter2%3A%40%2FSecret@[::1:1/results",
        "postgresql://bench:Hunter2@Pw@127.0.0.1:1/results",
    ],
)
def test_a_database_password_is_never_shown(url: str) -> None:
    from typer.testing import CliRunner

    from accelbench.cli import app

    out = CliRunner().invoke(app, ["results", "--db", url])
    assert out.exit_code == 2 and out.output.startswith("error: cannot connect to postgresql://")
    assert "Hunter2" not in out.output and "Secret" not in out.output and "Pw@" not in out.output


READERS = (
    ["results"],
    ["export"],
    ["report", "--format", "md"],
    ["compare", "--by", "platform"],
    ["recommend", "tiny_mlp"],
)


def _invoke(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from accelbench.cli import app

    out = CliRunner().invoke(app, list(args))
    return out.exit_code, out.output


def _foreign(path: Path, version: int) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
        db.execute(f"PRAGMA user_version = {version}")
    db.close()
    return path.read_bytes()


@pytest.mark.parametrize("version", [0, 2])
def test_another_applications_database_is_refused_and_never_written(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "app.sqlite"
    before = _foreign(path, version)
    for command in (*READERS, ["run", "tiny_mlp", "--device", "cpu"], ["import", str(path)]):
        code, out = _invoke(*command, "--db", str(path))
        assert code == 2 and out.count("\n") == 1, (command, out)  # before anything else
        assert "is not an accelbench database (users)" in out, (command, out)
        assert path.read_bytes() == before, command  # no table, no user_version, no WAL
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.sqlite"]  # no journal, no backup


def test_reading_never_writes_an_empty_or_older_database(tmp_path: Path, measured: Result) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for command in READERS:
        code, out = _invoke(*command, "--db", str(empty))
        assert code == 2 and "no results in" in out, (command, out)
    assert empty.read_bytes() == b""
    old = tmp_path / "old.sqlite"
    _schema_1_database(old, measured)
    before = old.read_bytes()
    code, out = _invoke("results", "--db", str(old))
    assert code == 0 and "tiny_mlp" in out, out
    assert old.read_bytes() == before  # read as it is: no migration, no backup
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "old.sqlite"]


def test_a_corrupt_database_is_one_line_for_every_reader(db_path: Path, measured: Result) -> None:
    with ResultStore(db_path) as store:
        store.put(measured)
    with sqlite3.connect(db_path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db_path.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # the table's page
    db_path.write_bytes(bytes(data))
    for command in READERS:
        code, out = _invoke(*command, "--db", str(db_path))
        assert code == 2 and out.count("\n") == 1 and out.startswith("error: "), (command, out)


def test_a_locked_database_is_tried_again(
    db_path: Path, measured: Result, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "RETRY_WAITS_S", (0.0, 0.0, 0.0))
    with ResultStore(db_path) as store:
        tries = []

        def flaky() -> str:
            tries.append(1)
            if len(tries) < 3:
                raise sqlite3.OperationalError("database is locked")
            return "stored"

        assert store._retrying(flaky) == "stored" and len(tries) == 3

        def full() -> None:
            raise sqlite3.OperationalError("database or disk is full")

        with pytest.raises(AccelbenchError, match="database or disk is full"):
            store._retrying(full)


def test_a_result_the_database_refuses_is_kept_for_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    def full(self: ResultStore, result: Result) -> None:
        raise AccelbenchError(f"{self.where}: OperationalError: database or disk is full")

    monkeypatch.setattr(ResultStore, "put", full)
    quick = ["--epochs", "2", "--steps-per-epoch", "3", "--device", "cpu", "--db", str(db)]
    code, out = _invoke("run", "tiny_mlp", "--batch-size", "2", *quick)
    last = out.splitlines()[-1]
    assert code == 2 and last.startswith("error: ") and "database or disk is full" in last, out
    (kept,) = (tmp_path / "state" / "accelbench" / "unsaved").iterdir()
    assert f"the cell's result is kept in {kept}" in last
    monkeypatch.undo()
    code, out = _invoke("import", str(kept), "--db", str(db))
    assert code == 0, out
    with ResultStore(db, writable=False) as store:
        assert [r.status for r in store.query()] == ["ok"]  # the measurement was not lost


def test_a_listing_made_by_other_code_is_made_again_from_its_record(
    db_path: Path, measured: Result, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored listing is what the table shows without the record: one that other code made
    (another listing.VERSION: another rule or format) is never shown as it is."""
    with ResultStore(db_path) as store:
        store.put(measured)
        (fresh,) = store.listings()
        assert fresh == listing.of(measured)
        stale = json.loads(fresh.dumps())
        names = list(listing.Listing._fields)
        stale[names.index("version")] = listing.VERSION - 1
        stale[names.index("flags")] = ["an old rule's flag"]
        with sqlite3.connect(db_path) as db:
            db.execute("UPDATE results SET listing = ?", (json.dumps(stale),))
        assert store.listings() == [fresh]
        monkeypatch.setattr(listing, "VERSION", listing.VERSION - 1)  # as the older code reads it
        assert store.listings()[0].flags == ("an old rule's flag",)
        monkeypatch.undo()
        for other in ('{"key": "an object, not the array"}', "[1, 2]", "not JSON"):
            with sqlite3.connect(db_path) as db:
                db.execute("UPDATE results SET listing = ?", (other,))
            assert store.listings() == [fresh]


def test_stored_json_reads_back_what_json_wrote_where_orjson_refuses_it() -> None:
    # json writes NaN and Infinity (a diverged run's figures) and lone surrogates; orjson
    # refuses them, and a listing or flat row holding one must still read back.
    for value in ([float("inf"), -float("inf"), 2**70, "\udc80"], {"a": [1, "x", None]}):
        text = json.dumps(value)
        assert schema.decoded(text) == json.loads(text)
    assert math.isnan(schema.decoded(json.dumps([float("nan")]))[0])
