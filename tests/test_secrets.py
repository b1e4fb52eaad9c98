"""Secrets stay out of the store, every export and every message: URL passwords found as libpq
finds them, secret-named variables and tags masked, and a planted password and API key searched
for in every command's output and every stored byte."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import secrets
from accelbench.cell import environment as capturing
from accelbench.cli import app
from accelbench.report.database import ResultStore
from accelbench.storage import connect, schema


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://bob:pa?ss#w@db.site/results", "postgresql://bob:***@db.site/results"),
        ("postgresql://bob:p@ss@db:5432/r", "postgresql://bob:***@db:5432/r"),
        ("postgresql://db/r?user=bob&password=x2x9", "postgresql://db/r?user=bob&password=***"),
        ("postgresql://bob:s%40cret@db/r", "postgresql://bob:***@db/r"),
        ("http://u:tok3n@prom:9090/x?query=sum(w)", "http://u:***@prom:9090/x?query=sum(w)"),
        ("postgresql://bob@db/r", "postgresql://bob@db/r"),
    ],
)
def test_a_urls_password_is_masked_where_libpq_and_a_url_parser_end_it(
    url: str, shown: str
) -> None:
    assert secrets.redact_url(url) == shown == connect.redacted(url)
    assert secrets.has_secret(url) is (shown != url)


def test_a_command_line_is_stored_without_its_secrets() -> None:
    argv = ["accelbench", "run", "x", "--db", "postgresql://a:b?c1@h/d", "--token=abc", "--api-key"]
    assert secrets.scrub_argv([*argv, "zzz", "--db=postgresql://q:w0rd@e/r"]) == [
        *argv[:4],
        "postgresql://a:***@h/d",
        "--token=***",
        "--api-key",
        "***",
        "--db=postgresql://q:***@e/r",
    ]


def test_variables_named_or_holding_secrets_are_never_captured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCH_API_KEY", "sk-planted")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    monkeypatch.setenv("OMP_STORE", "postgresql://u:pl4nted@h/d")
    monkeypatch.setenv("OMP_SERVE_KEYRING", "kept-out-by-name")
    monkeypatch.setenv("OMP_HIDDEN", "named by the serve spec")
    found = capturing.capture("cpu", hidden=("OMP_HIDDEN",)).env_vars
    assert found.get("NCCL_SOCKET_IFNAME") == "eth0"
    assert not {"TORCH_API_KEY", "OMP_STORE", "OMP_HIDDEN"} & set(found)


PLANTED = ("Hunter2pw", "sk-PLANTEDKEY", "Pl4ntedTag", "urlpw99")


def _leaks(text: str | bytes) -> list[str]:
    text = text.decode(errors="replace") if isinstance(text, bytes) else text
    return [secret for secret in PLANTED if secret in text]


@pytest.mark.slow
def test_a_planted_password_and_key_are_in_no_output_and_no_stored_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "site.sqlite"
    run = ["run", "tiny_mlp", "--batch-size", "2", "--epochs", "2", "--steps-per-epoch", "3"]
    run += ["--window-steps", "1", "--device", "cpu", "--db", str(db)]
    run += ["--tag", "note=postgresql://u:Pl4ntedTag@h/d", "--tag", "api_token=Pl4ntedTag"]
    # The command line as the user typed it: a database URL with a password in it.
    monkeypatch.setattr(sys, "argv", ["accelbench", *run, "--x", "postgresql://u:Hunter2pw@h/r"])
    monkeypatch.setenv("TORCH_API_KEY", "sk-PLANTEDKEY")
    monkeypatch.setenv("OMP_STATS_URL", "http://u:urlpw99@h:1")
    runner = CliRunner()
    done = runner.invoke(app, run)
    assert done.exit_code == 0, done.output
    record = json.loads(sqlite3.connect(db).execute("SELECT record FROM results").fetchone()[0])
    assert "postgresql://u:***@h/r" in record["argv"]  # kept, less the password
    readers = [
        ["results"],
        ["results", "--format", "csv"],
        ["results", "--format", "json"],
        *(["export", "--format", f] for f in ("json", "jsonl", "mllog")),
        *(["report", "--format", f, "--out", str(tmp_path / f"r.{f}")] for f in ("md", "csv")),
        ["report", "--format", "html", "--out", str(tmp_path / "r.html")],
        ["compare", "--by", "batch_size"],
        ["recommend", "tiny_mlp"],
        ["fleet"],
    ]
    searched = 0
    for args in readers:
        out = runner.invoke(app, [*args, "--db", str(db)])
        assert out.exit_code in (0, 2) and not _leaks(out.output), (args, out.output[-300:])
        searched += 1
    files = [*tmp_path.glob("r.*"), *tmp_path.glob("site.sqlite*")]
    assert files and not [f for f in files if _leaks(f.read_bytes())]
    assert searched == len(readers)


def test_a_migration_takes_secrets_out_of_stored_rows_and_their_backup(tmp_path: Path) -> None:
    from accelbench.records.result import Result
    from tests.conftest import tiny

    env = capturing.capture("cpu")
    db = tmp_path / "old.sqlite"
    with ResultStore(db) as store:
        store.put(Result.new(tiny(), env, "error", reason="r"))
    # As an earlier accelbench stored it: the command line as typed, a key in a variable.
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE results DROP COLUMN flat")  # added since
    (text,) = con.execute("SELECT record FROM results").fetchone()
    old = json.loads(text) | {"argv": ["accelbench", "--db", "postgresql://u:Hunter2pw@h/r"]}
    old["env"]["env_vars"] = {"TORCH_API_KEY": "sk-PLANTEDKEY"}
    # The schema before the rewrite that took secrets out (the last REWRITE).
    before = max(i for i, m in enumerate(schema.MIGRATIONS) if m is schema.REWRITE)
    con.execute("UPDATE results SET record = ?", (json.dumps(old),))
    con.execute(f"PRAGMA user_version = {before}")
    con.commit()
    con.close()
    for form in ("json", "jsonl"):  # read as it is (no migration): each record cleaned
        exported = CliRunner().invoke(app, ["export", "--format", form, "--db", str(db)])
        assert exported.exit_code == 0, exported.output
        assert not _leaks(exported.stdout) and "postgresql://u:***@h/r" in exported.stdout
    with ResultStore(db) as store:
        (migrated,) = store.query()
    assert migrated.argv == ["accelbench", "--db", "postgresql://u:***@h/r"]
    assert migrated.env.env_vars == {"TORCH_API_KEY": "***"}
    backup = db.with_name(f"old.sqlite.schema{before}.bak")
    assert backup.exists() and not _leaks(backup.read_bytes()) and not _leaks(db.read_bytes())


def test_every_error_line_and_log_line_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    url = "postgresql://bench:Hunter2pw?x@127.0.0.1:1/results?connect_timeout=1"
    out = CliRunner().invoke(app, ["results", "--db", url])
    assert out.exit_code == 2 and not _leaks(out.output) and "bench:***@" in out.output
    secrets.remember("sk-PLANTEDKEY")
    import logging

    record = logging.LogRecord("x", logging.WARNING, "f", 1, "key %s at %s", None, None)
    record.args = ("sk-PLANTEDKEY", "http://a:urlpw99@h")
    secrets.scrubbing_filter(record)
    assert not _leaks(record.getMessage()) and "***" in record.getMessage()


def test_the_unsaved_result_file_is_its_owners_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelbench.records.result import Result
    from accelbench.storage.exchange import keep_unsaved
    from tests.conftest import tiny

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    env = capturing.capture("cpu")
    result = Result.new(tiny(), env, "error", reason="r").model_copy(
        update={"argv": ["accelbench", "--db", "postgresql://u:Hunter2pw@h/r"]}
    )
    kept = keep_unsaved(result)
    assert kept.stat().st_mode & 0o077 == 0 and not _leaks(kept.read_text())
