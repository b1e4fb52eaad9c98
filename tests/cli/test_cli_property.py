"""Every command, every option, any value: accepted, or refused with exit code 2 and one line on
stderr, no traceback, and the database byte for byte as it was. A value that would start a cell
stops at the launcher (nothing is measured here): the property is about what comes before."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from accelbench.cell.environment import capture
from accelbench.cli import app
from accelbench.execution.meters import host as meters_host
from accelbench.orchestration import launch
from accelbench.records.environment import Environment
from accelbench.records.result import Result
from accelbench.report.database import ResultStore

COMMANDS: dict[str, list[str]] = {
    "run": ["run", "tiny_mlp"],
    "tune": ["tune", "tiny_mlp"],
    "slurm": ["slurm", "--nodes", "1"],
    "results": ["results"],
    "report": ["report", "--format", "md"],  # figures cost a second each; the format is fuzzed too
    "compare": ["compare", "--by", "platform"],
    "references": ["references"],
    "recommend": ["recommend", "tiny_mlp"],
    "export": ["export"],
    "import": ["import", "{export}"],
    "list": ["list"],
    "env": ["env"],
}
EDGES = [
    "",
    " ",
    "0",
    "-1",
    "1e18",
    str(10**30),
    "nan",
    "inf",
    "-inf",
    "1,,2",
    "a,b",
    "2%",
    "150%",
    "[/x]",
    "\x1b[2J",
    "x" * 300,
    "/dev/full",
    "/nonexistent/x",
    ".",
    "tiny_mlp",
    "fp32",
    "cpu",
    # URLs as --power-series, --endpoint and --db take them, and the export formats
    "http://[::1",
    "http://127.0.0.1:1",
    "http://u:Hunter2@127.0.0.1:x/",
    "postgresql://u:p?w@127.0.0.1:1/r",
    "jsonl",
    "mllog",
    "br0.2",
]
values = st.one_of(
    st.sampled_from(EDGES),
    st.text(max_size=12),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
)


class WouldRun(BaseException):
    """The value was accepted as far as starting a cell."""


def _options(name: str) -> list[str]:
    """The command's options that take a value (flags and --db aside)."""
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return sorted(
        opt
        for p in command.params
        if p.param_type_name == "option" and not p.is_flag and p.name != "db"
        for opt in p.opts[:1]
    )


ENV: list[Environment] = []


@pytest.fixture(scope="module")
def template(two_platforms: list[Result]) -> Iterator[Path]:
    """A database with results, and an export file, to copy for each example."""
    ENV.append(capture("cpu"))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp, "r.sqlite")
        with ResultStore(db) as store:
            for r in two_platforms:
                store.put(r)
        code = CliRunner().invoke(app, ["export", "--db", str(db), "--out", f"{tmp}/e.json"])
        assert code.exit_code == 0, code.output
        yield Path(tmp)


@pytest.mark.parametrize("name", sorted(COMMANDS))
@settings(
    max_examples=int(os.environ.get("ACCELBENCH_CLI_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_value_is_accepted_or_refused_in_one_line(
    name: str, template: Path, monkeypatch: pytest.MonkeyPatch, data: st.DataObject
) -> None:
    def would_run(*_: object) -> Result:
        raise WouldRun

    monkeypatch.setattr(launch, "run_in_child", would_run)
    # No child process: the probe and the pre-flight (which slurm runs alone) are tested apart.
    monkeypatch.setattr(launch, "probe_environment", lambda device, inputs, timeout_s: ENV[0])
    monkeypatch.setattr(launch, "preflight_in_child", lambda inputs, timeout_s: None)
    monkeypatch.setattr(meters_host.BusySince, "others", lambda self: (0.0, 2, 0.0))
    positional = len(COMMANDS[name]) > 1 and not COMMANDS[name][1].startswith("--")
    targets = _options(name) + (["<argument>"] if positional else [])
    if not targets:
        return  # no value to give (list)
    option = data.draw(st.sampled_from(targets), label="option")
    value = data.draw(values, label="value")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp, "r.sqlite")
        shutil.copy(template / "r.sqlite", db)
        before = db.read_bytes()
        monkeypatch.chdir(tmp)
        base = [a.replace("{export}", str(template / "e.json")) for a in COMMANDS[name]]
        if option == "<argument>":
            args = [base[0], value, *base[2:], "--db", str(db)]
        else:
            args = [*base, option, value, "--db", str(db)]
        if name == "slurm":
            args += ["--", "run", "tiny_mlp"]
        try:
            result = CliRunner().invoke(app, args)
        except WouldRun:
            return  # accepted: a cell would start
        if isinstance(result.exception, WouldRun):
            return
        assert result.exit_code in (0, 2), (args, result.output, result.exception)
        assert "Traceback" not in result.output
        if result.exit_code == 2:
            assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), (
                args,
                result.stderr,
            )
            assert db.read_bytes() == before, args
        assert not [f for f in os.listdir(tmp) if f.endswith(".partial")]
