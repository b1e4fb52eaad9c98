from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli import app

runner = CliRunner()
QUICK = ["--epochs", "2", "--steps-per-epoch", "4", "--window-steps", "1", "--device", "cpu"]


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def db_rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT workload, micro_batch, precision, status, items_per_s > 0 FROM results ORDER BY micro_batch"
        ).fetchall()


def stored(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT key, record FROM results ORDER BY key").fetchall()


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real sweep through the CLI, shared by the tests that read it back."""
    path = tmp_path_factory.mktemp("cli") / "results.sqlite"
    code, output = invoke("run", "tiny_mlp", "--batch-size", "2,8", *QUICK, "--db", str(path))
    assert code == 0, output
    return path, output


def test_run_stores_every_cell_and_ends_with_the_table(swept: tuple[Path, str]) -> None:
    path, output = swept
    assert db_rows(path) == [("tiny_mlp", 2, "fp32", "ok", 1), ("tiny_mlp", 8, "fp32", "ok", 1)]
    assert output.count("✓ tiny_mlp") == 2
    for header in (
        "Platform",
        "Replicas",
        "Micro batch",
        "Precision",
        "Last epoch (s)",
        "Throughput",
    ):
        assert header in output
    assert str(path) in output


def test_rerun_skips_stored_cells(swept: tuple[Path, str]) -> None:
    path, _ = swept
    code, output = invoke("run", "tiny_mlp", "--batch-size", "2,8", *QUICK, "--db", str(path))
    assert code == 0
    assert output.count("stored earlier, skipped") == 2
    assert len(db_rows(path)) == 2


def test_results_as_json_and_csv(swept: tuple[Path, str]) -> None:
    path, _ = swept
    code, output = invoke("results", "--format", "json", "--db", str(path))
    assert code == 0
    records = json.loads(output)
    assert [r["spec"]["batch_size"] for r in records] == [2, 8]
    assert all(r["env"]["device_type"] == "cpu" and r["metrics"]["step_ms"] for r in records)
    code, output = invoke("results", "--format", "csv", "--db", str(path), "--status", "ok")
    rows = list(csv.DictReader(io.StringIO(output)))
    assert [int(r["micro_batch"]) for r in rows] == [2, 8]
    assert all(float(r["items_per_s"]) > 0 for r in rows)


def test_results_table_filters(swept: tuple[Path, str]) -> None:
    path, _ = swept
    code, output = invoke("results", "--workload", "tiny_mlp", "--db", str(path))
    assert code == 0 and output.count("tiny_mlp") == 2
    code, output = invoke("results", "--status", "oom", "--db", str(path))
    assert code == 0 and "no stored results match" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "tiny_mlpp"], "unknown workload 'tiny_mlpp': did you mean tiny_mlp?"),
        (["run", "tiny_mlp", "--batch-size", "0"], "invalid value '0' for --batch-size"),
        (["run", "tiny_mlp", "--batch-size", "4,x"], "invalid value 'x' for --batch-size"),
        (["run", "tiny_mlp", "--precision", "fp8"], "invalid value 'fp8' for --precision"),
        (
            ["run", "tiny_mlp", "--precision", "tf32", "--device", "cpu"],
            "precision tf32 cannot run on this cpu",
        ),
        (["run", "tiny_mlp", "--batch-size", ","], "empty list"),
        (["results", "--workload", "resnet"], "unknown workload 'resnet'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    swept: tuple[Path, str], args: list[str], message: str
) -> None:
    path, _ = swept
    before = stored(path)
    code, output = invoke(*args, "--db", str(path))
    assert code == 2
    assert f"error: {message}" in output
    assert "Traceback" not in output
    assert stored(path) == before


def test_sweep_file_with_a_command_line_override(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('[fixed]\nworkload = "tiny_mlp"\nepochs = 1\n[axes]\nbatch_size = [2, 4]\n')
    path = tmp_path / "results.sqlite"
    code, output = invoke(
        "run", "--sweep", str(sweep), "--batch-size", "3", "--steps-per-epoch", "2",
        "--device", "cpu", "--db", str(path),
    )  # fmt: skip
    assert code == 0, output
    assert db_rows(path) == [("tiny_mlp", 3, "fp32", "ok", 1)]


def test_run_needs_a_workload_or_a_sweep_file() -> None:
    code, output = invoke("run")
    assert code == 2 and "name a workload" in output


def test_corrupt_database_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    code, output = invoke("run", "tiny_mlp", *QUICK, "--db", str(bad))
    assert code == 2 and "not a usable accelbench database" in output
    assert bad.read_text() == "not a database"


def test_list_shows_every_workload() -> None:
    code, output = invoke("list")
    assert code == 0
    for name in (
        "resnet50",
        "efficientnet_b0",
        "mobilenetv3_large",
        "bert_base_squad",
        "autoencoder",
    ):
        assert name in output


def test_env_as_json() -> None:
    code, output = invoke("env", "--device", "cpu", "--format", "json")
    assert code == 0
    env = json.loads(output)
    assert env["device_type"] == "cpu" and env["num_numa_nodes"] >= 1 and "torch" in env["versions"]
