"""The README's examples run as written."""

from __future__ import annotations

import re
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import typer

README = Path(__file__).parents[1] / "README.md"


def test_the_python_api_example_runs_as_written(tmp_path: Path) -> None:
    section = README.read_text().split("## Python API", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok ")  # run(): status, rate, p99
    assert [line.split()[:2] for line in lines[1:]] == [["16", "ok"], ["64", "ok"]]
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        assert db.execute("SELECT count(*) FROM results WHERE status = 'ok'").fetchone() == (2,)


def _commands() -> list[list[str]]:
    """Every `accelbench ...` command in the README's shell blocks, continuation lines joined
    and comments dropped."""
    lines, fence = [], None
    for line in README.read_text().replace("\\\n", " ").splitlines():
        if line.startswith("```"):
            fence = line[3:] if fence is None else None
        elif fence == "" and line.startswith("accelbench "):
            lines.append(shlex.split(line, comments=True)[1:])
    return lines


def test_every_command_in_the_readme_parses_and_its_cells_are_valid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The README's commands as a user would paste them: each option exists and takes its value,
    and each `run` makes valid cells (they are not run here: resnet50 on a CPU takes hours)."""
    from accelbench.cli import app
    from accelbench.cli.run import cells_of

    monkeypatch.chdir(README.parent)  # examples/... paths are relative to the checkout
    commands = _commands()
    assert len(commands) > 30
    group = typer.main.get_command(app)
    for args in commands:
        name, rest = args[0], args[1:]
        ctx = group.commands[name].make_context(name, rest)  # type: ignore[attr-defined]
        if name == "run":
            assert cells_of(ctx), args
