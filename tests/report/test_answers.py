"""The commands' JSON answers: each validates against its schema file in docs/schemas/, which
is its model's own, and says what the command's table says."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from accelbench.analysis import advice, references
from accelbench.cli import app
from accelbench.records.environment import DeviceInfo
from accelbench.records.result import Result
from accelbench.report import answers
from accelbench.report.database import ResultStore
from tests.conftest import with_rate

ROOT = Path(__file__).parents[2]


def _schemas_script() -> Any:
    found = importlib.util.spec_from_file_location("schemas", ROOT / "scripts" / "schemas.py")
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    return module


def test_the_schema_files_are_written_from_the_answers_models() -> None:
    written = _schemas_script().schemas()
    assert set(written) == {f"{name}.json" for name in answers.every()}
    for name, text in written.items():
        assert (ROOT / "docs" / "schemas" / name).read_text() == text, (
            f"docs/schemas/{name} is stale: run python scripts/schemas.py"
        )


def answer(*args: str, code: int = 0) -> Any:
    """The command's standard output, parsed and validated against its format's schema."""
    done = CliRunner().invoke(app, [*args, "--format", "json"])
    assert done.exit_code == code, done.output
    found = json.loads(done.stdout)  # the whole of standard output
    schema = json.loads((ROOT / "docs" / "schemas" / f"{found['format']}.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(found)
    return found


def _on_an_a100(result: Result, items_per_s: float) -> Result:
    """A real result moved to two A100s running the autoencoder at 512 (PEARC '22 Table 4)."""
    env = result.env.model_copy(
        update={"device_type": "cuda", "devices": [DeviceInfo(name="NVIDIA A100-SXM4-80GB")]}
    )
    spec = result.spec.model_copy(
        update={"workload": "autoencoder", "batch_size": 512, "replicas": 2}
    )
    moved = with_rate(result, items_per_s)
    return moved.model_copy(update={"env": env, "spec": spec, "key": "a100-autoencoder"})


def test_each_reading_command_answers_in_json_what_it_computes(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    db = str(tmp_path / "r.sqlite")
    a100 = _on_an_a100(two_platforms[0], 5000.0)
    here = two_platforms[0]  # batch 4 training, measured here: the same cell on five nodes
    assert here.items_per_s is not None
    nodes = [
        with_rate(here, here.items_per_s * factor).model_copy(
            update={"env": here.env.model_copy(update={"hostname": f"n{i}"}), "key": f"n{i}"}
        )
        for i, factor in enumerate((1.0, 1.01, 0.99, 1.02, 0.5))
    ]
    with ResultStore(db) as store:
        store.add([*two_platforms, a100, *nodes])

    shipped = answer("references", "--table", "Table 4")["references"]
    assert shipped and all(r["table"].startswith("Table 4") and r["source"] for r in shipped)
    captured = answer("env", "--device", "cpu")["environment"]
    assert captured["device_type"] == "cpu" and captured["versions"]["torch"]
    suites = answer("suites")["suites"]
    assert suites and all(part["cells"] > 0 for suite in suites for part in suite["parts"])
    listed = answer("list")
    assert {"tiny_mlp", "autoencoder", "resnet50"} <= {w["name"] for w in listed["workloads"]}

    advised = answer("recommend", "tiny_mlp", "--reference", "--db", db)
    expected = advice.recommend(two_platforms, "tiny_mlp", "throughput")
    platforms = advised["platforms"]
    assert [p["platform"] for p in platforms] == [a.platform for a in expected]
    best = platforms[0]["best"]
    assert best["value"] == pytest.approx(expected[0].options[0].value)
    assert best["runs"] == [r.key for r in expected[0].options[0].runs]
    assert advised["published"] is not None

    compared = answer("compare", "--reference", "--db", db, code=1)  # below its figure: exit 1
    (match,) = compared["matches"]
    found = references.match(a100)
    assert found is not None
    assert match["ratio"] == pytest.approx(found.ratio) and match["agreement"] == "below-reference"
    assert match["published"] == 8642 and match["key"] == "a100-autoencoder"
    assert ["tiny_mlp", two_platforms[0].platform] in compared["unmatched"]

    assert answer("compare", "--by", "platform", "--db", db)["ratios"]
    assert answer("history", "--db", db)["series"]

    (cell,) = answer("fleet", "--db", db)["cells"]
    assert [n["name"] for n in cell["nodes"] if n["outlier"]] == ["n4"], cell  # half as fast
    baseline = tmp_path / "baseline.csv"
    baseline.write_text(f"workload,value\ntiny_mlp,{here.items_per_s * 0.9}\n")
    judged = answer("accept", "--baseline", str(baseline), "--db", db, code=1)  # n4 fails
    outcomes = {j["key"]: j["outcome"] for j in judged["results"]}
    assert outcomes["n4"] == "fail" and outcomes["n0"] == "pass"
    assert answer("roofline", "--db", db)["results"] == []  # no ceiling measured here


def test_a_run_answers_with_the_cells_it_stored(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    cells = ["--batch-size", "2,4", "--epochs", "1", "--steps-per-epoch", "3", "--device", "cpu"]
    ran = answer("run", "tiny_mlp", *cells, "--db", str(db))
    keys = {k for (k,) in sqlite3.connect(db).execute("SELECT key FROM results")}
    assert {r["key"] for r in ran["results"]} == keys and len(keys) == 2
    for row in ran["results"]:
        assert row["status"] == "ok" and row["headline"]["unit"] == "samples/s"
        assert row["flags"] == row["verdict"].split(", ")  # too few steps: flagged
    refused = CliRunner().invoke(app, ["run", "tiny_mlp", "--dry-run", "--format", "json"])
    assert refused.exit_code == 2 and "--dry-run answers as a table" in refused.output
