"""Acceptance suites: shipped sweeps at published figures' configurations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import suites
from accelbench.analysis import references
from accelbench.cell.environment import capture
from accelbench.cli import app

runner = CliRunner()


@pytest.mark.parametrize("name", suites.names())
def test_every_cell_of_a_suite_has_its_published_figure(name: str) -> None:
    """A cell is in a suite to be set against a figure: same workload, precision and micro
    batch as a published throughput of its device type's family."""
    suite = suites.load(name)
    assert {"cpu", "cuda"} >= {d for part in suite.parts for d in part.devices}
    for part in suite.parts:
        for spec in part.specs():
            published = [
                r
                for r in references.query(workload=spec.workload)
                if r.metric in references.THROUGHPUT_METRICS and r.num_devices == spec.num_processes
            ]
            assert published, (name, spec.workload)
            same = [
                r
                for r in published
                if r.precision in (None, spec.precision)  # the paper gives none: fp32 here
                and r.micro_batch in (None, spec.batch_size)
            ]
            assert same, (name, spec.workload, spec.precision, spec.batch_size)


def test_parts_are_chosen_by_the_devices_found() -> None:
    cpu = capture("cpu")
    gpu = cpu.model_copy(update={"device_type": "cuda", "devices": cpu.devices * 1})
    two = cpu.model_copy(update={"device_type": "cuda", "devices": cpu.devices * 2})
    suite = suites.load("acceptance")
    chosen = {
        name: [(p.specs()[0].workload, p.specs()[0].replicas) for p in suites.parts_for(suite, env)]
        for name, env in (("cpu", cpu), ("gpu", gpu), ("two", two))
    }
    mamf = [("micro/matmul", 1)] * 2  # at H100's and A100's best shapes
    assert chosen == {
        "cpu": [("autoencoder", 1)],
        "gpu": [("autoencoder", 1), ("resnet50", 1), *mamf],
        "two": [("autoencoder", 1), ("autoencoder", 2), ("resnet50", 1), *mamf],
    }


def test_the_quick_suite_runs_on_a_cpu_and_says_nothing_could_be_compared(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "r.sqlite")
    fast = ["--epochs", "2", "--steps-per-epoch", "2", "--window-steps", "1"]  # overrides
    out = runner.invoke(app, ["run", "--suite", "quick", "--device", "cpu", *fast, "--db", db])
    assert out.exit_code == 0, out.output
    with sqlite3.connect(db) as conn:
        cells = conn.execute("SELECT workload, micro_batch, status FROM results").fetchall()
    assert cells == [("autoencoder", 10, "ok")]
    compared = runner.invoke(app, ["compare", "--reference", "--db", db])
    assert compared.exit_code == 0, compared.output
    assert "no published throughput for this device family" in compared.output
    listed = runner.invoke(app, ["suites"])
    assert listed.exit_code == 0 and listed.output.startswith("acceptance: ")
    unknown = runner.invoke(app, ["run", "--suite", "quik", "--db", db])
    assert unknown.exit_code == 2
    assert "no suite 'quik': give one of acceptance, quick" in unknown.output
