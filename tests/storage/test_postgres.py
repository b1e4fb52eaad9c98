"""The store on a real PostgreSQL server: the same schema, records and behaviour as SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cell.environment import capture
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result
from accelbench.report import listing
from accelbench.report.database import ResultStore
from accelbench.storage import exchange, schema
from accelbench.storage.schema import SCHEMA_VERSION

from ..conftest import tiny


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny())


def test_records_round_trip_and_upsert(fresh_postgres: str, measured: Result) -> None:
    failed = Result.new(tiny(batch_size=8), capture("cpu"), "oom", reason="OutOfMemoryError: x")
    with ResultStore(fresh_postgres) as store:
        store.put(measured)
        store.put(measured)  # the same cell again replaces it
        store.put(failed)
        assert store.get(measured.key) == measured
        assert store.get(failed.key) is not None and store.get("nope") is None
        assert store.query() == [measured, failed]
        assert store.query(status="oom") == [failed]
        assert store.query(platform=measured.env.platform[:3], limit=1) == [failed]
    with ResultStore(fresh_postgres) as again:  # schema already there: opened as it is
        assert again.query(workload="tiny_mlp", status="ok") == [measured]


def test_a_stream_reads_through_a_server_side_cursor(fresh_postgres: str, measured: Result) -> None:
    failed = Result.new(tiny(batch_size=8), capture("cpu"), "oom", reason="OutOfMemoryError: x")
    with ResultStore(fresh_postgres) as store:
        store.add([measured, failed])
        stream = store.stream(batch=1)
        first = next(stream)
        open_cursors = store._execute("SELECT name FROM pg_cursors").fetchall()
        assert [name for (name,) in open_cursors if name.startswith("accelbench_stream_")]
        assert [first, *stream] == store.query() == [measured, failed]
        assert store._execute("SELECT count(*) FROM pg_cursors").fetchone() == (0,)


def test_an_older_schema_is_migrated_with_a_backup_and_a_newer_one_refused(
    fresh_postgres: str, measured: Result
) -> None:
    import psycopg

    row = dict(zip(schema.COLUMNS, schema.row(measured, None, None), strict=True))
    del row["time_to_target_s"], row["listing"], row["flat"]
    with psycopg.connect(fresh_postgres, autocommit=True) as db:
        for statement in schema.statements(0, schema.POSTGRES):
            db.execute(statement)
        db.execute(
            f"INSERT INTO results ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})",
            list(row.values()),
        )
        db.execute("CREATE TABLE accelbench_schema (version INTEGER)")
        db.execute("INSERT INTO accelbench_schema VALUES (1)")
    with ResultStore(fresh_postgres) as store:
        assert store.get(measured.key) == measured
    with psycopg.connect(fresh_postgres, autocommit=True) as db:
        assert db.execute("SELECT version FROM accelbench_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert db.execute("SELECT key FROM results_schema1_backup").fetchall() == [(measured.key,)]
        (stored,) = db.execute("SELECT listing FROM results").fetchall()[0]
        assert stored == listing.of(measured).dumps()  # the migration made its listing
        db.execute("UPDATE accelbench_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(AccelbenchError, match="newer than this accelbench"):
        ResultStore(fresh_postgres)


def test_a_sweep_stores_into_the_site_database_by_url(fresh_postgres: str) -> None:
    quick = ["--epochs", "2", "--steps-per-epoch", "4", "--window-steps", "1", "--device", "cpu"]
    runner = CliRunner()
    done = runner.invoke(
        app, ["run", "tiny_mlp", "--batch-size", "2,4", *quick, "--db", fresh_postgres]
    )
    assert done.exit_code == 0, done.output
    assert "results go to postgresql://" in done.output
    shown = runner.invoke(app, ["results", "--format", "csv", "--db", fresh_postgres])
    assert (
        shown.exit_code == 0
        and shown.output.count("\ntiny_mlp") + shown.output.count(",tiny_mlp,") >= 2
    )


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(AccelbenchError) as caught:
        ResultStore("postgresql://me:secret@127.0.0.1:1/results?connect_timeout=2")
    message = str(caught.value)
    assert message.startswith("cannot connect to postgresql://me:***@127.0.0.1:1/results")
    assert "secret" not in message and "\n" not in message


def test_import_into_the_site_database_skips_what_it_has(
    fresh_postgres: str, two_platforms: list[Result], tmp_path: Path
) -> None:
    export = tmp_path / "cluster-a.json"
    export.write_text(exchange.dumps(two_platforms))
    with ResultStore(fresh_postgres) as store:
        store.put(two_platforms[0])
    done = CliRunner().invoke(app, ["import", str(export), "--db", fresh_postgres])
    assert done.exit_code == 0, done.output
    assert f"imported {len(two_platforms) - 1} new results" in done.output
    assert "1 were stored already" in done.output
    with ResultStore(fresh_postgres) as store:
        assert {r.key for r in store.query()} == {r.key for r in two_platforms}


def test_json_lines_from_and_into_the_site_database(
    fresh_postgres: str, two_platforms: list[Result], tmp_path: Path
) -> None:
    with ResultStore(fresh_postgres) as store:
        store.add(two_platforms)
    out, back = tmp_path / "site.jsonl", tmp_path / "back.sqlite"
    args = ["export", "--format", "jsonl", "--db", fresh_postgres, "--out", str(out)]
    assert CliRunner().invoke(app, args).exit_code == 0
    done = CliRunner().invoke(app, ["import", str(out), "--db", str(back)])
    assert done.exit_code == 0, done.output
    with ResultStore(back) as store:
        assert {r.key for r in store.query()} == {r.key for r in two_platforms}
    broken = tmp_path / "broken.jsonl"
    broken.write_text(out.read_text() + "{not json\n")
    with ResultStore(fresh_postgres) as store:
        store.put(two_platforms[0].model_copy(update={"tags": {"kept": "yes"}}))
    done = CliRunner().invoke(app, ["import", str(broken), "--db", fresh_postgres])
    assert done.exit_code == 2 and "is not a JSON record" in done.output
    with ResultStore(fresh_postgres) as store:  # rolled back: nothing written, nothing lost
        assert {r.key for r in store.query()} == {r.key for r in two_platforms}
        assert store.get(two_platforms[0].key).tags == {"kept": "yes"}  # type: ignore[union-attr]


def test_a_lost_connection_is_reconnected_and_the_write_kept(
    fresh_postgres: str, measured: Result, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from accelbench.storage import connect
    from accelbench.storage import store as store_module

    monkeypatch.setattr(store_module, "RETRY_WAITS_S", (0.1, 0.1, 0.1))
    again = measured.model_copy(update={"key": "second", "reason": "after the restart"})
    with ResultStore(fresh_postgres) as store:
        store.put(measured)
        tries: list[str] = []
        real = connect.postgres

        def restarting(url: str, shown: str) -> object:  # the server is not back at first
            tries.append(url)
            if len(tries) == 1:
                raise AccelbenchError(f"cannot connect to {shown}")
            return real(url, shown)

        monkeypatch.setattr(connect, "postgres", restarting)
        with psycopg.connect(fresh_postgres, autocommit=True) as admin:  # as a restart does
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            )
        store.put(again)  # AdminShutdown, a failed reconnect, then reconnected and written
        assert len(tries) == 2
        assert {r.key for r in store.query()} == {measured.key, "second"}


def test_compare_reads_the_same_cells_from_the_site_database(
    fresh_postgres: str, two_platforms: list[Result], tmp_path: Path
) -> None:
    lite = tmp_path / "r.sqlite"
    for where in (fresh_postgres, lite):
        with ResultStore(where) as store:
            store.add(two_platforms)
    for by in ("platform", "batch_size"):
        site = CliRunner().invoke(app, ["compare", "--by", by, "--db", fresh_postgres])
        assert site.exit_code == 0, site.output
        assert (
            site.output
            == CliRunner().invoke(app, ["compare", "--by", by, "--db", str(lite)]).output
        )
