"""Every script in benchmarks/ runs in its quick mode and prints its ratio, so none can rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
SCRIPTS = BENCHMARKS.parent / "scripts"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("[!_]*.py")))
def test_benchmark_quick_mode_prints_its_ratio(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio [\w/ ]+: \d+\.\d{3}", last), last


def test_gpu_check_says_plainly_that_it_needs_a_gpu(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: `make gpu-check` runs for real there")
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "gpu_check.py"), "--out", str(tmp_path / "g.md")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and not (tmp_path / "g.md").exists()
    assert done.stderr == "error: make gpu-check needs a CUDA device, and torch sees none here\n"


def test_gpu_check_runs_each_framework_that_sees_the_gpu_and_its_bare_loop(tmp_path: Path) -> None:
    sys.path[:0] = [str(SCRIPTS), str(BENCHMARKS)]
    try:
        import gpu_check
        from _options import parser
    finally:
        del sys.path[:2]

    def commands(*frameworks: str) -> list[list[str]]:
        return [c for _, c in gpu_check.steps(tmp_path / "g.sqlite", False, frameworks)]

    def framework_lists(found: list[list[str]]) -> list[str]:
        return [c[c.index("--framework") + 1] for c in found if "--framework" in c]

    def bare(found: list[list[str]]) -> list[str]:
        return [Path(c[1]).name for c in found if c[1].endswith("_bare.py")]

    alone = commands("torch")
    assert framework_lists(alone) == ["torch", "torch"] and bare(alone) == []
    every = commands("torch", "jax", "tensorflow")
    assert framework_lists(every) == ["torch,jax,tensorflow", "torch,jax"]  # no TF decoder
    assert bare(every) == ["jax_bare.py", "tf_bare.py"]
    for command in every:
        if command[1].endswith("_bare.py"):  # arguments its script takes
            args = parser("doc", "lenet5", 32).parse_args(command[2:])
            assert args.device == "cuda" and args.workload == "autoencoder"


@pytest.mark.slow
def test_store_scale_runs_on_postgresql(postgres_url: str) -> None:
    done = subprocess.run(
        [
            *(sys.executable, str(BENCHMARKS / "store_scale.py"), "--quick"),
            *("--postgres", postgres_url),  # a listing and the export: the server's reads
            *("--only", "results (table)", "--only", "export --format jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "results (table)" in done.stdout, done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio [\w/ ]+: \d+\.\d{3}", last), last
