"""The ReFrame test library, run by ReFrame itself on this machine (its generic local system):
the headline and verdict come back as performance variables, set against references."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

CHECK = Path(__file__).with_name("lenet5_check.py")
SERIAL = ["--exec-policy", "serial", "--report-file"]  # a check at a time: no two share the CPUs


def test_reframe_runs_a_cell_and_judges_its_headline(tmp_path: Path) -> None:
    pytest.importorskip("reframe")
    report = tmp_path / "report.json"
    reframe = Path(sys.executable).with_name("reframe")
    done = subprocess.run(
        [
            str(reframe),
            "-c",
            str(CHECK),
            "-r",
            "--prefix",
            str(tmp_path / "rfm"),
            *SERIAL,
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout[-3000:]  # one check misses its reference
    cases = {c["name"]: c for c in json.loads(report.read_text())["runs"][0]["testcases"]}
    meets, misses = cases["Lenet5Meets"], cases["Lenet5Misses"]
    assert (meets["result"], misses["result"], misses["fail_phase"]) == (
        "pass",
        "fail",
        "performance",
    )
    values = {k.rsplit(":", 1)[1]: v[0] for k, v in meets["perfvalues"].items()}
    stage = tmp_path / "rfm" / "output" / "generic" / "default" / "builtin" / "Lenet5Meets"
    with (stage / "accelbench-result.csv").open(newline="") as f:
        (row,) = csv.DictReader(f)
    assert values["throughput"] == pytest.approx(float(row["items_per_s"]))
    assert values["valid"] == (row["verdict"] == "valid")
    half = (float(row["items_per_s_ci_high"]) - float(row["items_per_s_ci_low"])) / 2
    assert values["interval_pct"] == pytest.approx(100 * half / float(row["items_per_s"]))
