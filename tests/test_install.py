"""Installing accelbench into an environment that already has torch: pip's own plan, read from
its --dry-run --report, never replaces a torch that meets the floor."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
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
    # Installed so, the core runs the seeds' own model and names the extra a model needs.
    subprocess.run([*pip, "install", str(ROOT)], check=True, capture_output=True)
    accelbench = str(venv / "bin" / "accelbench")
    quick = ["--epochs", "1", "--steps-per-epoch", "5", "--device", "cpu"]
    ran = subprocess.run([accelbench, "run", "tiny_mlp", *quick], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr[-2000:]
    refused = subprocess.run(
        [accelbench, "run", "unet_medical", *quick], capture_output=True, text=True
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].endswith("pip install 'accelbench[vision]'")


@pytest.mark.slow
def test_the_wheel_and_the_sdist_hold_the_data_files(tmp_path: Path) -> None:
    """The references, the acceptance rule and the suites travel in both distributions."""
    pytest.importorskip("build")
    source = tmp_path / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", source / "src", ignore=skip)  # the checkout stays as it is
    for name in (
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "MANIFEST.in",
        "CHANGELOG.md",
        "mkdocs.yml",
    ):
        shutil.copy(ROOT / name, source)
    for folder in ("examples", "docs"):
        shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    out = tmp_path / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    data = {"analysis/references.csv", "analysis/acceptance.toml", "py.typed"}
    data |= {f"suites/{p.name}" for p in (ROOT / "src" / "accelbench" / "suites").glob("*.toml")}
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert {f"accelbench/{d}" for d in data} <= in_wheel
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {f"src/accelbench/{d}" for d in data} <= in_sdist
    examples = {str(p.relative_to(ROOT)) for p in (ROOT / "examples").rglob("*") if p.is_file()}
    assert examples and examples <= in_sdist  # what the docs run beside the package
