from __future__ import annotations

import csv
import gc
import io
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
import typer
from pydantic import Field
from typer.testing import CliRunner

from accelbench import workloads
from accelbench.cli import app
from accelbench.cli.options import OPTION_NAMES, with_fields
from accelbench.records.spec import RunSpec, knobs
from accelbench.report.database import ResultStore
from accelbench.storage.store import Store

from ..conftest import make_image_folder, make_shards, quick

runner = CliRunner()
EXAMPLE = Path(__file__).parents[2] / "examples" / "my_model.py"
QUICK = quick()


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
    # 4 steady steps give no interval: each cell is measured but flagged, and its line says so
    assert output.count("! tiny_mlp") == 2 and output.count(": too-short") >= 2
    assert "✓ tiny_mlp" not in output
    for header in (
        "Platform",
        "Replicas",
        "Micro batch",
        "Precision",
        "Last epoch (s/items)",
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
    code, newest = invoke("results", "--format", "json", "--limit", "1", "--db", str(path))
    assert code == 0 and newest.splitlines()[1] == output.splitlines()[-2]  # the same line
    code, output = invoke("results", "--format", "csv", "--db", str(path), "--status", "ok")
    rows = list(csv.DictReader(io.StringIO(output)))
    assert [int(r["micro_batch"]) for r in rows] == [2, 8]
    assert all(float(r["items_per_s"]) > 0 for r in rows)


def test_results_as_json_are_the_records_as_stored_none_read(
    swept: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A site's 100,000 records are copied as stored (1.8 s of CPU), not each validated and
    written again (16.5 s): the same records as the export's."""
    from accelbench.storage import schema

    path, _ = swept
    monkeypatch.setattr(schema, "record", lambda *_: pytest.fail("a record was read"))
    for command in (["results", "--format", "json"], ["report", "--format", "json"]):
        code, output = invoke(*command, "--db", str(path))
        assert code == 0, output
        code, exported = invoke("export", "--db", str(path))
        assert json.loads(output) == json.loads(exported)["results"]


def test_results_table_filters(swept: tuple[Path, str]) -> None:
    path, _ = swept
    code, output = invoke("results", "--workload", "tiny_mlp", "--db", str(path))
    assert code == 0 and output.count("│ tiny_mlp") == 2  # table rows, not the notes below
    code, output = invoke("results", "--status", "oom", "--db", str(path))
    assert code == 0 and "no stored results match" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "tiny_mlpp"], "unknown workload 'tiny_mlpp': did you mean tiny_mlp?"),
        (["run", "tiny_mlp", "--batch-size", "0"], "invalid value '0' for --batch-size"),
        (["run", "tiny_mlp", "--batch-size", "4,x"], "invalid value 'x' for --batch-size"),
        (["run", "tiny_mlp", "--precision", "fp4"], "invalid value 'fp4' for --precision"),
        (
            ["run", "tiny_mlp", "--workers", "many"],
            "invalid value 'many' for --workers: Input should be a valid integer, unable to "
            "parse string as an integer; or Input should be 'auto'",
        ),
        (
            ["run", "tiny_mlp", "--precision", "tf32", "--device", "cpu"],
            "precision tf32 cannot run on this cpu",
        ),
        (["run", "tiny_mlp", "--batch-size", ","], "empty list"),
        (["run", "tiny_mlp", "--model-arg", "width=3"], "tiny_mlp takes no model arg 'width'"),
        (
            ["run", "resnet50", "--model-arg", "image_size"],
            "--model-arg 'image_size': write it as KEY=VALUE",
        ),
        (
            ["run", "hf/gpt2", "--model-arg", "n_layers=2"],
            "'n_layers' is not a field of the gpt2 config: did you mean n_layer?",
        ),
        (["run", "timm/resnet5O"], "timm has no model 'resnet5O'"),
        (["run", "missing.py:build"], "no model file missing.py"),
        (["run", "a\x00.py:build"], "no model file a\\x00.py"),  # shown escaped
        (["run", "autoencoder", "--data", "/no/such/dir"], "no data at /no/such/dir"),
        (["run", "lstm", "--data", "."], "lstm trains on synthetic data only"),
        (["run", "tiny_mlp", "--ci", "tight"], "--ci 'tight': give a percentage above 0"),
        (["run", "tiny_mlp", "--ci", "-1%"], "--ci '-1%': give a percentage above 0"),
        (["results", "--workload", "resnet"], "unknown workload 'resnet'"),
        (
            ["run", "tiny_mlp", "--replicas", "3", "--nodes", "2"],
            "3 devices do not spread evenly over 2 nodes",
        ),
        (["run", "tiny_mlp", "--replicas", "2", "--bn-span", "3"], "--bn-span 3 does not divide"),
        (
            ["run", "tiny_mlp", "--batch-size", "4", "--replicas", "1,2", "--global-batch", "12"],
            "global batch 12 is not a multiple of micro batch 4 x 2 replica(s)",
        ),
        (
            ["run", "tiny_mlp", "--global-batch", "8", "--grad-accum", "2"],
            "give --global-batch or --grad-accum, not both",
        ),
        (
            ["run", "tiny_mlp", "--replicas", "2", "--nodes", "2", "--device", "cpu"],
            "--nodes 2 runs inside a Slurm allocation",
        ),
        (
            ["run", "tiny_mlp", "--replicas", "4096", "--device", "cpu"],
            "4096 CPU processes per node, but this host has",
        ),
        (
            ["run", "tiny_mlp", "--replicas", "2", "--bn-span", "2", "--device", "cpu"],
            "torch syncs batch norm on GPUs only",
        ),
        (
            ["run", "tiny_mlp", "--numa-binding", "nodes"],
            "Invalid value for '--numa-binding': 'nodes' is not one of 'node', 'socket'",
        ),
        (
            [
                "run",
                "tiny_mlp",
                "--compile",
                "--compile-mode",
                "reduce-overhead",
                "--device",
                "cpu",
            ],
            "--compile-mode reduce-overhead replays CUDA graphs, which cpu has none of",
        ),
        (["run", "tiny_mlp", "--platform", ""], "invalid value '' for --platform"),
        (["run", "tiny_mlp", "--epochs", "abc"], "Invalid value for '--epochs'"),
        (["run", "tiny_mlp", "--bogus"], "No such option: --bogus"),  # click may suggest one
        (["tune", "tiny_mlp", "--replicas", "abc"], "--replicas 'abc': give whole numbers"),
        (["tune", "tiny_mlp", "--replicas", "1,,2"], "--replicas '1,,2': give whole numbers"),
        (["tune", "tiny_mlp", "--replicas", "0"], "--replicas '0': give whole numbers"),
        (["results", "--status", "anything"], "--status 'anything': give one of ok"),
        (["import", "x.jsonl", "--jobs", str(10**6)], "--jobs 1000000 is more than the"),
        (["import", "x.jsonl", "--jobs", "0"], "Invalid value for '--jobs'"),
        (["results", "--platform", "x" * 300], "--platform is over 200 characters"),
        (["recommend", "tiny_mlp", "--memory-headroom", "150%"], "--memory-headroom '150%'"),
        (
            ["run", "tiny_mlp", "--model-arg", "image_size=" + "9" * 5000],
            "--model-arg image_size: the value is too long",
        ),
        (["run", "tiny_mlp", "--data", "d" * 5000], "--data is empty or over 4,096"),
        (["run", "tiny_mlp", "--repeats", str(10**18)], "Invalid value for '--repeats'"),
        (
            ["run", "tiny_mlp", "--workers", str(10**18)],
            "invalid value '1000000000000000000' for --workers",
        ),
        (["run", "tiny_mlp", "--timeout-s", "nan"], "--timeout-s nan: give a positive number"),
        (
            ["run", "resnet50", "--model-arg", "num_classes=0"],
            "--model-arg num_classes=0: give a whole number",
        ),
        (
            ["run", "timm/resnet18", "--model-arg", "drop_rate=abc"],
            "--model-arg drop_rate='abc': give a probability",
        ),
        (["run", "json:nosuchfn"], "json defines no 'nosuchfn': name its model function"),
        (["run", "os:nosuchfn"], "os defines no 'nosuchfn'"),  # a frozen module: no source
        (["run", f"{EXAMPLE}:nope"], f"{EXAMPLE} defines no 'nope'"),
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
        "run",
        "--sweep",
        str(sweep),
        "--batch-size",
        "3",
        "--steps-per-epoch",
        "2",
        "--device",
        "cpu",
        "--db",
        str(path),
    )
    assert code == 0, output
    assert db_rows(path) == [("tiny_mlp", 3, "fp32", "ok", 1)]


def test_sweep_file_with_model_args_as_an_axis(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        '[fixed]\nworkload = "hf/gpt2"\nepochs = 1\nsteps_per_epoch = 2\ndevice = "cpu"\n'
        "[axes]\nmodel_args = [\n"
        "  {seq_len = 16, n_layer = 1, n_embd = 32, n_head = 2},\n"
        "  {seq_len = 32, n_layer = 1, n_embd = 32, n_head = 2},\n]\n"
    )
    path = tmp_path / "results.sqlite"
    code, output = invoke("run", "--sweep", str(sweep), "--db", str(path))
    assert code == 2 and "--batch-size is required" in output
    code, output = invoke("run", "--sweep", str(sweep), "--batch-size", "2", "--db", str(path))
    assert code == 0, output
    with sqlite3.connect(path) as db:
        lengths = db.execute(
            "SELECT json_extract(record, '$.spec.model_args.seq_len') FROM results"
        ).fetchall()
    assert sorted(lengths) == [(16,), (32,)]


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
    for name in workloads.WORKLOADS:
        assert f"{name} " in output


@pytest.mark.parametrize("make", [make_image_folder, make_shards])
def test_user_model_on_real_images_reports_input_wait(
    tmp_path: Path, make: Callable[[Path], Path]
) -> None:
    data, path = make(tmp_path / "data"), tmp_path / "results.sqlite"
    code, output = invoke(
        "run",
        f"{EXAMPLE}:build",
        "--model-arg",
        "width=8",
        "--data",
        str(data),
        "--workers",
        "2",
        "--batch-size",
        "4",
        *QUICK,
        "--db",
        str(path),
    )
    assert code == 0, output
    assert "Input wait (%)" in output and "input wait" in output
    [(_, text)] = stored(path)
    record = json.loads(str(text))
    assert record["status"] == "ok"
    assert record["spec"]["data"] == str(data) and record["spec"]["model_args"] == {"width": 8}
    assert 0 <= record["metrics"]["input_wait_frac"] <= 1


def test_a_user_model_that_fails_only_when_it_runs_is_stored_as_an_error(tmp_path: Path) -> None:
    """What the pre-flight cannot see (it runs the loss on the meta device) fails in its cell:
    stored with its traceback, and a sweep whose every cell failed exits 1."""
    model, path = tmp_path / "broken.py", tmp_path / "results.sqlite"
    model.write_text(
        "import torch\nfrom accelbench import Workload\n\n"
        "def loss(model, batch):\n"
        "    if batch['x'].is_meta:\n"
        "        return model(batch['x']).sum()\n"
        "    return undefined_name\n\n"
        "def build():\n"
        "    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(4)}, loss)\n"
    )
    code, output = invoke("run", f"{model}:build", *QUICK, "--db", str(path))
    assert code == 1 and output.endswith("error: every cell failed: the reasons are above\n")
    [(_, text)] = stored(path)
    record = json.loads(str(text))
    assert record["status"] == "error"
    assert "NameError: name 'undefined_name' is not defined" in record["reason"]
    assert str(model) in record["detail"]  # the traceback points at the user's file


@pytest.mark.parametrize(
    "command",
    [
        ["results"],
        ["results", "--format", "csv"],
        ["report", "--format", "md"],
        ["compare", "--by", "batch_size"],
        ["fleet"],
        ["history"],
        ["export"],
        ["recommend", "tiny_mlp"],
    ],
)
def test_a_read_command_runs_without_the_cycle_collector_and_restores_it(
    swept: tuple[Path, str], command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a read builds from a database holds no cycle: full passes over it cost the HTML
    report 0.3 of its time at 100k results (cli.app.reads)."""
    path, _ = swept
    collecting: list[bool] = []
    rows = Store._rows

    def read(store: Store, *args: Any, **kwargs: Any) -> Any:
        collecting.append(gc.isenabled())
        return rows(store, *args, **kwargs)

    monkeypatch.setattr(Store, "_rows", read)
    assert gc.isenabled()
    code, output = invoke(*command, "--db", str(path))
    assert code == 0, output
    assert collecting and not any(collecting)
    assert gc.isenabled()


def test_env_as_json() -> None:
    code, output = invoke("env", "--device", "cpu", "--format", "json")
    assert code == 0
    answer = json.loads(output)
    assert (answer["format"], answer["version"]) == ("accelbench-env", 1)
    env = answer["environment"]
    assert env["device_type"] == "cpu" and env["num_numa_nodes"] >= 1 and "torch" in env["versions"]
    code, output = invoke("env", "--format", "csv")  # it printed JSON
    assert code == 2 and "'csv' is not one of" in output


def quick_sweep(path: Path, sql: str, *args: str) -> tuple[list[tuple[object, ...]], str]:
    """A quick sweep of tiny_mlp with `args` through the CLI; the rows `sql` selects after it."""
    code, output = invoke("run", "tiny_mlp", *args, *QUICK, "--db", str(path))
    assert code == 0, output
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall(), output


def test_repeats_run_interleaved_and_report_their_spread(tmp_path: Path) -> None:
    rows, output = quick_sweep(
        tmp_path / "results.sqlite",
        "SELECT json_extract(record, '$.spec.repeat'), micro_batch FROM results ORDER BY created_at",
        *("--batch-size", "2,4", "--repeats", "2", "--ci", "50%"),
    )
    # Every cell once, then again.
    assert rows == [(0, 2), (0, 4), (1, 2), (1, 4)]
    assert output.count("2 repeats,") == 2
    assert "Verdict" in output and "95% CI (%)" in output and "MFU (%)" in output


def test_replica_sweep_holds_the_global_batch_and_keeps_every_rank(tmp_path: Path) -> None:
    path = tmp_path / "scaling.sqlite"
    rows, output = quick_sweep(
        path,
        "SELECT num_devices, global_batch, status, record FROM results ORDER BY num_devices",
        # one torch thread per process at both counts: torchrun's default for two replicas
        *("--batch-size", "4", "--replicas", "1,2", "--global-batch", "16", "--threads", "1"),
    )
    assert [row[:3] for row in rows] == [(1, 16, "ok"), (2, 16, "ok")]
    single, double = (json.loads(str(row[3])) for row in rows)
    assert (single["spec"]["grad_accum"], double["spec"]["grad_accum"]) == (4, 2)
    assert single["metrics"]["ranks"] == []
    ranks = double["metrics"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["items_per_s"] > 0 and r["numa_node"] is not None for r in ranks)
    # One story: each rank over the headline's window, so the rank whose clock the headline
    # reads (the slowest) delivers exactly half of it.
    headline = double["metrics"]["delivered"]["items_per_s"]
    assert len({r["first_steady_step"] for r in ranks} - {None}) == 1
    assert min(abs(2 * r["items_per_s"] / headline - 1) for r in ranks) < 1e-9
    assert "x2 replicas fp32: per rank" in output and "over the headline's steady steps" in output
    assert "Speed-up (eff.)" in output
    code, output = invoke("results", "--format", "csv", "--db", str(path))
    assert code == 0
    by_replicas = {r["replicas"]: r for r in csv.DictReader(io.StringIO(output))}
    speedup = float(by_replicas["2"]["speedup"])
    rates = {n: float(by_replicas[n]["items_per_s"]) for n in ("1", "2")}
    assert speedup == pytest.approx(rates["2"] / rates["1"])
    assert float(by_replicas["2"]["scaling_efficiency"]) == pytest.approx(speedup / 2)
    assert by_replicas["1"]["speedup"] == ""
    # Without --threads, one replica ran auto threads (torch's default less what the host's other
    # work holds) and each of two one: where the one ran more than one, no efficiency is shown,
    # and the note says how to get one. What ran is read from its record, not from this host.
    code, output = invoke(
        "run",
        "tiny_mlp",
        *QUICK,
        "--batch-size",
        "4",
        "--replicas",
        "1,2",
        "--global-batch",
        "16",
        "--db",
        str(path),
    )
    assert code == 0
    with sqlite3.connect(path) as db:
        (threads,) = db.execute(
            "SELECT json_extract(record, '$.env.torch_num_threads') FROM results"
            " WHERE num_devices = 1 AND json_extract(record, '$.spec.threads') IS NULL"
        ).fetchone()
    unlike = threads > 1
    assert ("no scaling efficiency" in output and "--threads 1" in output) == unlike


def test_inference_sweep_stores_latencies_and_names_the_headlines(tmp_path: Path) -> None:
    rows, output = quick_sweep(
        tmp_path / "infer.sqlite",
        "SELECT scenario, micro_batch, json_extract(record, '$.metrics.step_ms_steady.p90') "
        "FROM results ORDER BY micro_batch",
        *("--scenario", "infer", "--batch-size", "1,8", "--latency-bound-ms", "1000"),
    )
    assert [(s, b) for s, b, _ in rows] == [("infer", 1), ("infer", 8)]
    assert all(isinstance(p90, float) and p90 > 0 for _, _, p90 in rows)
    assert "infer bs=1 fp32: latency per batch p50" in output
    assert "lowest latency" in output and "p99 not shown (needs 100)" in output


def test_server_rate_search_through_the_cli(tmp_path: Path) -> None:
    rows, output = quick_sweep(
        tmp_path / "server.sqlite",
        "SELECT scenario, json_extract(record, '$.spec.latency_bound_ms'), "
        "json_array_length(json_extract(record, '$.metrics.record.trials')) FROM results",
        *("--scenario", "server", "--latency-bound-ms", "50", "--num-queries", "120"),
    )
    assert rows == [("server", 50.0, 6)]
    # On a loaded host no rate may keep within the bound: the search says so, by the same line.
    assert re.search(
        r"server highest rate with p99 within 50 ms|no rate kept p99 within 50 ms", output
    )


def test_every_spec_field_is_an_option_of_run() -> None:
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    params = {p.name for p in command.params}
    missing = [f for f in knobs() if OPTION_NAMES.get(f, f) not in params]
    assert missing == ["code_digest"]  # the sweep sets it from the model file, no one gives it


def test_a_new_spec_field_needs_no_cli_edit() -> None:
    class Extended(RunSpec):
        kernel: Literal["flash", "math"] = Field(default="math", description="Attention kernel.")
        budget_gib: float | None = Field(default=None, description="Memory budget, GiB.")

    seen: dict[str, object] = {}

    @with_fields(("kernel", "budget_gib", "epochs"), Extended)
    def command(**knobs: object) -> None:
        seen.update(knobs)

    one = typer.Typer()
    one.command()(command)
    result = runner.invoke(one, ["--kernel", "flash", "--budget-gib", "1.5"])
    assert result.exit_code == 0, result.output
    assert seen == {"kernel": "flash", "budget_gib": 1.5, "epochs": 2}  # epochs: RunSpec's default
    assert type(seen["kernel"]) is str  # a choice arrives as its plain value
    assert "Attention kernel." in runner.invoke(one, ["--help"]).output
    bad = runner.invoke(one, ["--kernel", "fast"])
    assert bad.exit_code == 2 and "'fast'" in bad.output


def test_a_time_limit_must_be_positive_and_finite(db_path: Path) -> None:
    code, out = invoke("run", "tiny_mlp", *QUICK, "--db", str(db_path))
    assert code == 0, out
    before = stored(db_path)
    for limit in ("0", "-1", "-inf", "nan", "inf"):
        forced = ("run", "tiny_mlp", *QUICK, "--force", f"--timeout-s={limit}")
        code, out = invoke(*forced, "--db", str(db_path))
        assert code == 2 and "give a positive number of seconds" in out, limit
        code, out = invoke("tune", "tiny_mlp", f"--timeout-s={limit}", "--db", str(db_path))
        assert code == 2 and "give a positive number of seconds" in out, limit
    assert stored(db_path) == before  # the good result was not overwritten as a timeout


def test_an_output_path_that_cannot_be_written_is_one_line(
    swept: tuple[Path, str], tmp_path: Path
) -> None:
    path, _ = swept
    folder = tmp_path / "folder"
    folder.mkdir()
    afile = tmp_path / "a.txt"
    afile.write_text("kept")
    bad = ["", str(folder), str(tmp_path / "missing" / "r.html"), "/dev/full", "a" * 5000, "a\x00"]
    for out in bad:
        for command in (
            ["report", "--out", out],
            ["export", "--out", out],
            ["slurm", "--nodes", "1", "--out", out, "--", "run", "tiny_mlp"],
        ):
            result = runner.invoke(app, [*command, "--db", str(path)])
            assert result.exit_code == 2, (command, result.output)
            assert result.output.count("\n") == 1 and result.output.startswith("error: ")
    code, out = invoke("report", "--figures", str(afile), "--db", str(path))
    assert code == 2 and "is not a folder" in out and afile.read_text() == "kept"
    assert Path("/dev/full").is_char_device()  # still the device, not a file renamed over it
    assert not list(tmp_path.rglob("*.partial")) and not list(Path.cwd().glob(".*.partial"))


def test_a_cell_that_exits_without_a_result_says_so(tmp_path: Path) -> None:
    model, path = tmp_path / "quits.py", tmp_path / "results.sqlite"
    model.write_text(
        "import os, torch\nfrom accelbench import Workload\n\n"
        "def loss(model, batch):\n"
        "    if not batch['x'].is_meta:  # the pre-flight passes; the cell quits\n"
        "        os._exit(0)\n"
        "    return model(batch['x']).sum()\n\n"
        "def build():\n"
        "    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(4)}, loss)\n"
    )
    code, output = invoke("run", f"{model}:build", *QUICK, "--db", str(path))
    assert code == 1, output
    [(_, text)] = stored(path)
    reason = json.loads(str(text))["reason"]
    assert reason.startswith("cell process exited with code 0 and no result: does the model")


def test_what_a_cell_forked_ends_with_it(tmp_path: Path) -> None:
    import psutil

    model, pid_file = tmp_path / "forks.py", tmp_path / "pid"
    model.write_text(
        "import subprocess, sys\n"
        f"sys.path.insert(0, {str(EXAMPLE.parent)!r})\n"
        "from my_model import build as example\n\n"
        "def build():\n"
        "    helper = subprocess.Popen(['sleep', '300'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(helper.pid))\n"
        "    return example()\n"
    )
    code, output = invoke("run", f"{model}:build", *QUICK, "--db", str(tmp_path / "r.sqlite"))
    assert code == 0, output
    helper = int(pid_file.read_text())
    assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE


def test_fail_on_gates_ci_and_dry_run_lists_what_would_run(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    # Two steps a cell: a steady state too short for an interval, so every cell is flagged.
    short = ["run", "tiny_mlp", "--batch-size", "2,4", "--epochs", "1", "--steps-per-epoch", "2"]
    code, output = invoke(*short, "--device", "cpu", "--db", str(db))
    assert code == 0, output  # flagged cells are results: no failure by default
    code, output = invoke(*short, "--device", "cpu", "--fail-on", "flagged", "--db", str(db))
    assert code == 1 and "error: 2 of 2 cells were flagged (--fail-on flagged)" in output
    code, output = invoke(*short, "--device", "cpu", "--fail-on", "error", "--db", str(db))
    assert code == 0, output  # flagged, but none failed
    code, output = invoke(
        *short, "--batch-size", "8", "--device", "cpu", "--dry-run", "--db", str(db)
    )
    assert code == 0, output
    assert "to run: tiny_mlp bs=8 fp32" in output and "1 cell(s), 1 to run" in output
    code, output = invoke(*short, "--device", "cpu", "--dry-run", "--db", str(db))
    assert output.count("stored: tiny_mlp") == 2 and "2 cell(s), 0 to run" in output
    assert len(stored(db)) == 2  # the dry run ran and stored nothing


def test_fail_on_error_exits_1_when_a_cell_fails(tmp_path: Path) -> None:
    model, db = tmp_path / "fails.py", tmp_path / "r.sqlite"
    model.write_text(
        "import torch\nfrom accelbench import Workload\n"
        "def loss(m, b):\n"
        "    if b['x'].shape[0] > 4 and not torch.jit.is_tracing():\n"
        "        raise RuntimeError('no batch above 4')\n"
        "    return m(b['x']).sum()\n"
        "def build():\n"
        "    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(4)}, loss)\n"
    )
    cells = ["run", f"{model}:build", "--batch-size", "4,8", *QUICK, "--db", str(db)]
    code, output = invoke(*cells)
    assert code == 0, output
    code, output = invoke(*cells, "--fail-on", "error")
    assert code == 1 and "error: 1 of 2 cells failed (--fail-on)" in output


def test_an_edited_model_file_is_measured_again_and_its_old_result_kept(tmp_path: Path) -> None:
    model, db = tmp_path / "mine.py", tmp_path / "r.sqlite"
    source = (
        "import torch\nfrom accelbench import Workload\n"
        "def build():\n"
        "    return Workload('items', lambda: torch.nn.Linear(4, WIDTH), "
        "lambda g: {'x': torch.randn(4)}, lambda m, b: m(b['x']).sum())\n"
    )
    model.write_text("WIDTH = 2\n" + source)
    cell = ["run", f"{model}:build", *QUICK, "--db", str(db)]
    code, output = invoke(*cell)
    assert code == 0 and "stored earlier, skipped" not in output, output
    code, output = invoke(*cell)
    assert code == 0 and "stored earlier, skipped" in output, output  # the same code: reused
    model.write_text("WIDTH = 18\n" + source)  # about 9x the weights
    code, output = invoke(*cell)
    assert code == 0 and "stored earlier, skipped" not in output, output  # measured again
    with ResultStore(db) as store:
        digests = {r.spec.code_digest for r in store.query()}
    assert len(digests) == 2 and None not in digests  # both versions' results, each named


def test_a_record_names_its_command_code_and_numeric_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    head = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    code, output = invoke("--version")
    assert code == 0 and output.startswith("accelbench ") and f"(commit {head}" in output
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("NCCL_ALGO", "Ring")  # a variable that changes numbers is kept
    monkeypatch.setattr(sys, "argv", ["accelbench", "run", "tiny_mlp"])
    code, output = invoke("run", "tiny_mlp", *QUICK, "--db", str(db))
    assert code == 0, output
    with ResultStore(db) as store:
        (r,) = store.query()
    assert r.argv == ["accelbench", "run", "tiny_mlp"]
    assert r.env.versions["accelbench_commit"].startswith(head)
    assert r.env.env_vars["NCCL_ALGO"] == "Ring"
    assert {"torch", "accelbench", "python"} <= r.env.versions.keys()


def test_a_cells_output_is_kept_in_its_log_and_streamed_with_verbose(tmp_path: Path) -> None:
    model, db = tmp_path / "talks.py", tmp_path / "r.sqlite"
    model.write_text(
        "import torch\nfrom accelbench import Workload\n"
        "def build():\n"
        "    print('hello from the model file', flush=True)\n"
        "    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(4)}, lambda m, b: m(b['x']).sum())\n"
    )
    code, output = invoke("run", f"{model}:build", *QUICK, "--quiet", "--db", str(db))
    assert code == 0 and "hello from the model file" not in output, output
    assert "cell(s); results go to" not in output  # --quiet: the table only
    with ResultStore(db) as store:
        (r,) = store.query()
    assert r.log_path is not None and Path(r.log_path).parent == tmp_path / "logs"
    assert "hello from the model file" in Path(r.log_path).read_text()
    code, output = invoke("run", f"{model}:build", *QUICK, "--force", "--verbose", "--db", str(db))
    assert code == 0 and "hello from the model file" in output, output


def test_progress_and_cell_lines_go_to_stderr_and_the_table_to_stdout(tmp_path: Path) -> None:
    out = runner.invoke(app, ["run", "tiny_mlp", *QUICK, "--db", str(tmp_path / "r.sqlite")])
    assert out.exit_code == 0, out.output
    assert "cell(s); results go to" in out.stderr and "tiny_mlp bs=" in out.stderr
    assert "cell(s); results go to" not in out.stdout and "Throughput" in out.stdout


def test_tags_are_kept_and_exported_with_the_command_that_reruns_the_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import csv
    import io
    import sys

    db = tmp_path / "r.sqlite"
    monkeypatch.setattr(sys, "argv", ["accelbench", "run", "tiny_mlp", "--tag", "job=4711 a"])
    code, output = invoke(
        "run", "tiny_mlp", *QUICK, "--tag", "job=4711", "--tag", "node=n01", "--db", str(db)
    )
    assert code == 0, output
    with ResultStore(db) as store:
        (r,) = store.query()
    assert r.tags == {"job": "4711", "node": "n01"}
    code, output = invoke("results", "--format", "csv", "--db", str(db))
    (row,) = csv.DictReader(io.StringIO(output[output.index("key,") :]))
    assert json.loads(row["tags"]) == {"job": "4711", "node": "n01"}
    assert row["command"] == "accelbench run tiny_mlp --tag 'job=4711 a'"  # quoted for a shell
    code, output = invoke("run", "tiny_mlp", "--tag", "job", "--db", str(db))
    assert code == 2 and "--tag 'job': write it as KEY=VALUE" in output


def test_dash_h_is_help_for_the_tool_and_each_command() -> None:
    for args, usage in ((["-h"], " [OPTIONS] COMMAND"), (["results", "-h"], " results [OPTIONS]")):
        code, output = invoke(*args)
        assert code == 0 and usage in output.splitlines()[0]
        assert output == invoke(*args[:-1], "--help")[1]
