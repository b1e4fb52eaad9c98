"""Hostile text in stored results is inert in every output: the terminal (no Rich markup, no
control sequence), CSV (no formula) and Markdown (no table row, line break or link)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report import inert
from accelbench.report.database import ResultStore

from ..conftest import on_platform

HOSTILE = [
    "GPU [/x]",  # a closing tag with nothing to close: Rich's MarkupError
    "[link=https://evil.example]click[/link]",
    "[bold red]loud[/]",
    "\x1b[2J\x1b[Hcleared",  # clear the screen
    "\x1b]0;title\x07",  # set the window title
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",  # an OSC-8 hyperlink
    "\x1b[6n",  # ask the terminal where its cursor is
    '=HYPERLINK("https://evil.example")',
    "+1+1",
    "@SUM(A1)",
    "-2+3",
    "\tTAB",
    "| --- |\n| row |",
    "[x](javascript:alert(1))",
    "<script>alert(1)</script>",
    ":smile: :warning:",
]


def test_terminal_text_reads_no_markup_and_shows_control_characters() -> None:
    assert inert.terminal("GPU [/x]").plain == "GPU [/x]"
    assert inert.plain("\x1b[2J\x07\x9b") == "\\x1b[2J\\x07\\x9b"
    assert inert.plain("tab\tand\nline") == "tab\tand\nline"


def test_csv_cells_never_start_a_formula() -> None:
    assert [inert.csv_cell(v) for v in ("=1+1", "+1", "-x", "@A", "\tx", "\rx")] == [
        "'=1+1",
        "'+1",
        "'-x",
        "'@A",
        "'\tx",
        "'\rx",
    ]
    assert inert.csv_cell(-2.5) == -2.5 and inert.csv_cell("GPU") == "GPU"


def test_markdown_cells_make_no_row_break_or_link() -> None:
    text = inert.markdown("| --- |\n[x](javascript:alert(1)) <b>*hi*</b>")
    assert "\n" not in text and "|" not in text.replace("\\|", "")
    assert "[x]" not in text and "<b>" not in text and "*hi*" not in text
    assert inert.markdown("<1") == "<1"  # no tag can start there: it stays as it reads


@pytest.fixture
def hostile_db(two_platforms: list[Result], tmp_path: Path) -> Path:
    db = tmp_path / "hostile.sqlite"
    base = next(r for r in two_platforms if r.spec.scenario == "train" and r.metrics)
    with ResultStore(db) as store:
        for i, text in enumerate(HOSTILE):
            r = on_platform(base, text, 1.0 + i / 10)
            assert r.metrics is not None
            metrics = r.metrics.model_copy(update={"item_unit": text})
            store.put(r.model_copy(update={"metrics": metrics, "reason": text}))
    return db


@pytest.mark.parametrize(
    "command",
    [
        ["results"],
        ["results", "--project-epochs", "90", "--epoch-items", "1000"],
        ["compare", "--by", "platform"],
        ["compare", "--reference"],
        ["recommend", "tiny_mlp"],
    ],
)
def test_hostile_names_reach_the_terminal_inert(hostile_db: Path, command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--db", str(hostile_db)])
    # compare --reference exits 1 when a run lies outside its published figure's band.
    assert result.exit_code in ((0, 1) if "--reference" in command else (0,)), result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    if command == ["results"]:
        assert "GPU [/x]" in result.output and "[bold red]loud[/]" in result.output


def test_hostile_names_are_inert_in_csv_and_markdown(hostile_db: Path, tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["results", "--format", "csv", "--db", str(hostile_db)])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.output)))
    assert len(rows) == len(HOSTILE)
    for row in rows:
        for column in ("platform", "hostname", "item_unit", "reason"):
            assert not row[column].startswith(inert.FORMULA_START), (column, row[column])
    md = tmp_path / "report.md"
    done = CliRunner().invoke(
        app, ["report", "--format", "md", "--out", str(md), "--db", str(hostile_db)]
    )
    assert done.exit_code == 0, done.output
    text = md.read_text()
    assert "<script>" not in text and "[x](" not in text and "\x1b" not in text
    assert "\\[x\\](javascript:" in text  # escaped: shown, never a link
    assert "\n| row |" not in text  # the stored newline did not start a table row


def test_a_sweep_survives_markup_in_an_error_and_in_a_model_path(tmp_path: Path) -> None:
    folder = tmp_path / "dir[/x]"
    folder.mkdir(parents=True)  # "dir[" holding "x]": the path reads as a closing tag
    model = folder / "model.py"
    model.write_text(
        "import torch\nfrom accelbench import Workload\n\n"
        "def loss(model, batch):\n"
        "    if not batch['x'].is_meta:  # past the pre-flight, in the cell\n"
        "        raise ValueError('no file at /data/[/]weird')\n"
        "    return model(batch['x']).sum()\n\n"
        "def build(**kwargs):\n"
        "    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(4)}, loss)\n"
    )
    db = tmp_path / "r.sqlite"
    args = ["run", f"{model}:build,tiny_mlp", "--batch-size", "2", "--epochs", "2"]
    args += ["--steps-per-epoch", "3", "--device", "cpu", "--db", str(db)]
    out = CliRunner().invoke(app, args)
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    assert "no file at /data/[/]weird" in out.output
    with ResultStore(db, writable=False) as store:
        stored = {r.spec.workload.rsplit(":", 1)[-1]: r.status for r in store.query()}
    assert stored == {"build": "error", "tiny_mlp": "ok"}  # the second cell ran
    # Refused by the pre-flight: the same message, as it reads, on the one error line.
    model.write_text('def build(**kwargs):\n    raise ValueError("no file at /data/[/]weird")\n')
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2
    assert "cannot be made: ValueError: no file at /data/[/]weird (model.py:2)" in out.output
