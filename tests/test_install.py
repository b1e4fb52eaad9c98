"""Installing accelbench into an environment that already has torch: pip's own plan, read from
its --report, never replaces a torch that meets the floor."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
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


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and the sdist built from a copy of this checkout with its git history (so
    setuptools-scm bakes the commit in), the checkout left as it is."""
    pytest.importorskip("build")
    pytest.importorskip("setuptools_scm")
    source = tmp_path_factory.mktemp("source")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "_version.py")
    shutil.copytree(ROOT / "src", source / "src", ignore=skip)
    for name in (
        "pyproject.toml",
        "README.md",
        "LICENSE",
        "MANIFEST.in",
        "CHANGELOG.md",
        "mkdocs.yml",
    ):
        shutil.copy(ROOT / name, source)
    for folder in ("examples", "docs", ".git"):
        if (ROOT / folder).exists():
            shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    out = source / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.slow
def test_the_built_wheel_keeps_a_present_cpu_torch_and_records_its_commit(
    dist: Path, tmp_path: Path
) -> None:
    wheel = _local_torch_wheel()
    if wheel is None:
        pytest.skip("no local CPU torch wheel to install (PIP_FIND_LINKS)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "--disable-pip-version-check", "--quiet"]
    # No bytecode compiled ahead: torch's 10,000 modules took 36 s of the test's 2 minutes. Each
    # module imported is compiled once, as on a user's machine: where PYTHONDONTWRITEBYTECODE is
    # set (it is here) every process compiled torch's again, 19 s of CPU a `run` instead of 6.
    subprocess.run([*pip, "install", "--no-compile", str(wheel)], check=True, capture_output=True)
    user = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    (ours,) = dist.glob("*.whl")
    report = tmp_path / "report.json"  # pip's plan, as it carried it out
    install = [*pip, "install", "--no-compile", "--report", str(report), str(ours)]
    done = subprocess.run(install, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"pip could not reach the package index: {done.stderr[-300:]}")
    installs = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert "accelbench" in installs and "typer" in installs
    assert "torch" not in installs  # the present CPU torch meets the floor: kept
    assert not installs & {"torchvision", "transformers", "timm", "monai"}  # extras, not core
    # Installed so, the core runs the seeds' own model, records the commit it was built from
    # (no checkout beside it to ask), and names the extra a model needs.
    accelbench, db = str(venv / "bin" / "accelbench"), tmp_path / "r.sqlite"
    quick = ["--epochs", "1", "--steps-per-epoch", "5", "--device", "cpu", "--db", str(db)]
    ran = subprocess.run(
        [accelbench, "run", "tiny_mlp", *quick],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=user,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    if (ROOT / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        (record,) = sqlite3.connect(db).execute("SELECT record FROM results").fetchone()
        versions = json.loads(record)["env"]["versions"]  # a wheel built from the sdist: short
        commit = versions.get("accelbench_commit", "").removesuffix("-dirty")
        assert len(commit) >= 7 and head.startswith(commit), versions
    refused = subprocess.run(
        [accelbench, "run", "unet_medical", *quick],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=user,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].endswith("pip install 'accelbench[vision]'")


@pytest.mark.slow
def test_the_wheel_and_the_sdist_hold_the_data_files(dist: Path) -> None:
    """The references, the acceptance rule and the suites travel in both distributions."""
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    data = {"analysis/references.csv", "analysis/acceptance.toml", "py.typed"}
    data |= {f"suites/{p.name}" for p in (ROOT / "src" / "accelbench" / "suites").glob("*.toml")}
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert {f"accelbench/{d}" for d in data} <= in_wheel
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {f"src/accelbench/{d}" for d in data} <= in_sdist
    examples = {
        str(p.relative_to(ROOT))
        for p in (ROOT / "examples").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts  # bytecode an import left: not shipped
    }
    assert examples and examples <= in_sdist  # what the docs run beside the package
