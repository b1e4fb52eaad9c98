"""A file a user names is read only when it is a regular file of the size its kind can be: a
device that never ends costs one line, not the host's memory (the fuzzed CLI test once gave
`--prices /dev/full`, and its worker grew to 22 GB before the kernel killed it)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import inputs
from accelbench.cli import app
from accelbench.errors import AccelbenchError

SERVE = ["run", "--served-model", "m", "--scenario", "serve", "--endpoint", "http://127.0.0.1:1"]


@pytest.mark.parametrize(
    "args",
    [
        ["recommend", "tiny_mlp", "--prices"],
        ["run", "tiny_mlp", "--sweep"],
        ["accept", "--baseline"],
        ["accept", "--fleet", "--rule"],
        [*SERVE, "--trace"],
        [*SERVE, "--lengths"],
        [*SERVE, "--power-series"],
    ],
    ids=lambda a: " ".join(a[-1:]),
)
def test_a_device_for_a_file_is_refused_in_one_line_before_it_is_read(
    tmp_path: Path, args: list[str]
) -> None:
    done = CliRunner().invoke(app, [*args, "/dev/zero", "--db", str(tmp_path / "r.sqlite")])
    assert done.exit_code == 2, done.output
    assert done.stderr.count("\n") == 1 and "/dev/zero is not a file: give" in done.stderr


def test_a_file_over_its_kinds_size_is_refused_and_one_within_is_read(tmp_path: Path) -> None:
    settings = tmp_path / "prices.toml"
    settings.write_text("[prices]\n" + "x" * inputs.SETTINGS_BYTES)
    with pytest.raises(AccelbenchError, match=r"prices file .* is over 1 MiB"):
        inputs.read_text(settings, "prices file")
    settings.write_text('[prices]\n"A100" = 2.5\n')
    assert inputs.read_text(settings, "prices file") == '[prices]\n"A100" = 2.5\n'


def test_a_file_that_grows_past_its_limit_while_read_stops_there(tmp_path: Path) -> None:
    log = tmp_path / "power.csv"
    log.write_text("time_s,watts\n1,150\n")
    with inputs.opened(log, "power series", limit_bytes=40) as f:
        rows = csv.reader(f)
        assert next(rows) == ["time_s", "watts"]
        with log.open("a") as writer:  # the logger goes on writing
            writer.write("2,150\n" * 10)
        with pytest.raises(AccelbenchError, match=r"power series .* is over"):
            list(rows)
