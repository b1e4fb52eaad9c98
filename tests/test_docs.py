"""The README and the docs site: the site builds strictly, the README is the front door that
points at each page, and every example runs or parses as written."""

from __future__ import annotations

import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def _commands(path: Path) -> list[list[str]]:
    """Every `accelbench ...` command in a page's plain code blocks, continuation lines joined
    and comments dropped."""
    lines, fence = [], None
    for line in path.read_text().replace("\\\n", " ").splitlines():
        if line.startswith("```"):
            fence = line[3:] if fence is None else None
        elif fence == "" and line.startswith("accelbench "):
            lines.append(shlex.split(line, comments=True)[1:])
    return lines


def test_the_python_api_example_runs_as_written(tmp_path: Path) -> None:
    (code,) = re.findall(r"```python\n(.*?)```", (DOCS / "api.md").read_text(), flags=re.S)[:1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok ")  # run(): status, rate, p99
    assert [line.split()[:2] for line in lines[1:]] == [["16", "ok"], ["64", "ok"]]
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("SELECT count(*) FROM results WHERE status = 'ok'").fetchone() == (2,)


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_shown_parses_and_its_cells_are_valid(
    page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commands as a user would paste them: each option exists and takes its value, and
    each `run` makes valid cells (they are not run here: resnet50 on a CPU takes hours)."""
    from accelbench.cli import app
    from accelbench.cli.run import cells_of

    monkeypatch.chdir(ROOT)  # examples/... paths are relative to the checkout
    group = typer.main.get_command(app)
    for args in _commands(page):
        name, rest = args[0], args[1:]
        ctx = group.commands[name].make_context(name, rest)  # type: ignore[attr-defined]
        if name == "run":
            assert cells_of(ctx), args


def test_the_readme_is_a_front_door_to_every_page() -> None:
    text = README.read_text()
    assert len(text.encode()) < 12_000
    assert re.findall(r"^make \w+", text.split("## Quick start")[1], flags=re.M)[:2] == [
        "make demo",
        "make test",
    ]
    linked = set(re.findall(r"\]\(docs/([\w/-]+\.md)\)", text))
    assert linked == {str(p.relative_to(DOCS)) for p in PAGES}
    assert len(_commands(README)) >= 5


def test_every_scenario_has_its_row() -> None:
    from accelbench import scenarios

    text = (DOCS / "scenarios.md").read_text()
    assert {s.name for s in scenarios.all_scenarios()} <= set(
        re.findall(r"^\| `([\w-]+)` \|", text, re.M)
    )


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.skip("mkdocs is not installed (pip install '.[docs]')")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "index.html").exists()
