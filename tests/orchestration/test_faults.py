"""Faults a sweep must survive: a rank killed in a 2-rank run, a model that ends its own
process, a model file that never finishes building. Each is stored or refused with its reason
within its time limit, and leaves no process behind."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report.database import ResultStore

from ..conftest import quick

FAULTY = """
import ctypes, os, signal, time
import torch
from accelbench import Workload

def step(fault, seen, model, batch):
    if not batch['x'].is_meta:  # in the cell, not in the pre-flight
        seen.append(1)
        if fault == 'kill rank 1' and os.environ.get('RANK') == '1' and len(seen) == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # as an administrator or a node's OOM killer
        if fault == 'exit':
            print('a line the model printed')
            os._exit(0)
        if fault == 'crash':
            ctypes.string_at(0)  # a native library's bad pointer
    return model(batch['x']).sum()

def build(fault='none'):
    if fault == 'build forever':
        while True:
            time.sleep(0.1)
    seen = []
    return Workload(
        'items', lambda: torch.nn.Linear(4, 2), lambda g: {'x': torch.randn(4)},
        lambda model, batch: step(fault, seen, model, batch),
    )
"""
QUICK = ["--batch-size", "2", *quick(device=None)]


def _run(tmp_path: Path, fault: str, *args: str) -> tuple[int, str, list[Result]]:
    model = tmp_path / "faulty.py"
    model.write_text(FAULTY)
    db = tmp_path / "r.sqlite"
    run = ["run", f"{model}:build", "--model-arg", f"fault={fault}", *QUICK, "--device", "cpu"]
    out = CliRunner().invoke(app, [*run, *args, "--db", str(db)])
    results: list[Result] = []
    if db.exists():
        with ResultStore(db, writable=False) as store:
            results = list(store.query())
    return out.exit_code, out.output, results


def _orphans(model: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if model in cmdline:
            found.append(proc)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("sharding", [[], ["--fsdp"]], ids=["ddp", "fsdp"])
def test_a_rank_killed_mid_run_is_stored_interrupted_naming_it_and_nothing_hangs(
    tmp_path: Path, sharding: list[str]
) -> None:
    began = time.perf_counter()
    _, output, results = _run(
        tmp_path, "kill rank 1", "--replicas", "2", *sharding, "--timeout-s", "240"
    )
    assert time.perf_counter() - began < 200, output  # torchrun ended it, not the time limit
    (result,) = results
    assert result.status == "interrupted", (result.status, result.reason)
    assert "SIGKILL" in (result.reason or "") and "rank 1" in (result.reason or "")
    time.sleep(1.0)  # torchrun's agent reaps its workers on its way out
    assert not _orphans(str(tmp_path / "faulty.py")), "a rank outlived its cell"


@pytest.mark.slow
def test_a_model_that_ends_its_process_is_told_so_not_by_its_own_output(tmp_path: Path) -> None:
    _, _, results = _run(tmp_path, "exit")
    (result,) = results
    assert result.status == "error"
    assert "exited with code 0 and no result" in (result.reason or "")
    assert "a line the model printed" not in (result.reason or "")
    assert "a line the model printed" in (result.detail or "")


@pytest.mark.slow
def test_a_crashed_cell_keeps_where_it_crashed(tmp_path: Path) -> None:
    """A segfault's reason names its signal, and the cell's output its Python stack."""
    _, _, results = _run(tmp_path, "crash")
    (result,) = results
    assert result.status == "error" and "SIGSEGV" in (result.reason or ""), result.reason
    detail = result.detail or ""
    line = next(i for i, text in enumerate(FAULTY.splitlines(), 1) if "string_at(0)" in text)
    assert f'faulty.py", line {line} in step' in detail, detail


@pytest.mark.slow
def test_a_model_file_that_never_builds_is_refused_within_the_sweeps_time_limit(
    tmp_path: Path,
) -> None:
    began = time.perf_counter()
    code, output, _ = _run(tmp_path, "build forever", "--timeout-s", "8")
    assert code == 2 and time.perf_counter() - began < 60, output
    assert output.strip().splitlines()[-1].startswith("error: ") and "8 s" in output
