"""Installing accelbench into an environment that already has torch: pip's own plan, read from
its --dry-run --report, never replaces a torch that meets the floor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _local_torch_wheel() -> Path | None:
    """A CPU torch wheel on this machine's local wheel directory (PIP_FIND_LINKS), if any."""
    where = Path(os.environ.get("PIP_FIND_LINKS", "/opt/wheels"))
    return next(iter(sorted(where.glob("torch-*+cpu-*.whl"))), None) if where.is_dir() else None


@pytest.mark.slow
def test_installing_the_core_keeps_a_present_cpu_torch(tmp_path: Path) -> None:
    wheel = _local_torch_wheel()
    if wheel is None:
        pytest.skip("no local CPU torch wheel to install (PIP_FIND_LINKS)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "install", str(wheel)], check=True, capture_output=True)
    report = tmp_path / "report.json"
    plan = [*pip, "install", "--dry-run", "--report", str(report), str(ROOT)]
    done = subprocess.run(plan, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"pip could not reach the package index: {done.stderr[-300:]}")
    installs = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert ("accelbench" in installs and "typer" in installs) or "accelbench" in installs
    assert "torch" not in installs  # the present CPU torch (2.13) meets the floor: kept
    assert not installs & {"torchvision", "transformers", "timm", "monai"}  # extras, not core
