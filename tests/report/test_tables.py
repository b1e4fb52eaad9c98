from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.cli.app import PLAIN_ABOVE
from accelbench.records.result import Result, result_key
from accelbench.report import tables
from accelbench.report.cells import LAST_EPOCH
from accelbench.report.database import ResultStore

from ..conftest import SIM_PLATFORM, on_platform


def test_table_1_sets_first_beside_steady_epoch_by_device_count(
    two_platforms: list[Result],
) -> None:
    grid = tables.seed_table_1(two_platforms)
    assert grid is not None and "Table 1" in grid.title
    rows = [dict(zip(grid.headers, row, strict=True)) for row in grid.rows]
    assert [(r["Devices"], r["Micro batch"]) for r in rows] == [("1", "16"), ("2", "16")]
    one, two = (
        r
        for r in two_platforms
        if r.spec.batch_size == 16
        and r.spec.scenario == "train"
        and SIM_PLATFORM not in r.env.platform
    )
    assert one.metrics is not None and two.metrics is not None
    assert rows[0]["1st epoch (items/s)"] == tables.rate_text(one.metrics.epochs[0].items_per_s)
    assert rows[1]["Steady (items/s)"] == tables.rate_text(two.metrics.items_per_s)


def test_tables_need_their_axes(two_platforms: list[Result]) -> None:
    one_device = [r for r in two_platforms if r.spec.replicas == 1]
    assert tables.seed_table_1(one_device) is None
    assert tables.seed_table_3(one_device) is None  # batch varies, devices do not
    wider = [*two_platforms, on_platform(two_platforms[0], None, 1.9, replicas=2)]
    grid = tables.seed_table_3(wider)
    assert grid is not None
    assert [(row[4], row[7]) for row in grid.rows] == [
        ("4", "1"),
        ("16", "1"),
        ("64", "1"),
        ("4", "2"),
        ("16", "2"),
    ]


def test_html_table_escapes_cells() -> None:
    grid = tables.Grid("<b>t</b>", ("<i>h</i>",), [("<script>x</script>",)], frozenset({0}))
    text = tables.to_html(grid)
    assert "<script>" not in text and "<b>" not in text and "<i>" not in text
    assert "&lt;script&gt;x&lt;/script&gt;" in text


def test_a_narrow_terminal_folds_long_names_instead_of_cutting_them() -> None:
    from rich.console import Console

    name = "/home/someone/projects/forecasting/models/temporal_fusion.py:build_large_model"
    grid = tables.Grid("", ("Workload", "Items/s"), [(name, "1,234")], frozenset({0}))
    console = Console(width=40, record=True)
    console.print(tables.rich(grid))
    text = console.export_text()
    assert "…" not in text
    column = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert "".join(column) == name


def test_plain_text_aligns_columns_and_keeps_every_cell_inert() -> None:
    grid = tables.Grid(
        "T", ("Name", "Rate"), [("a\x1b[2Jb", "1"), ("long name", "1,234")], frozenset({0})
    )
    lines = tables.text(grid).splitlines()
    assert lines[:3] == ["T", "Name        Rate", "---------  -----"]
    assert lines[3] == "a\\x1b[2Jb      1"  # escaped: no sequence reaches the terminal
    assert lines[4] == "long name  1,234" and "\x1b" not in tables.text(grid)


def test_a_listing_too_long_for_rich_is_printed_as_plain_text(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    base = two_platforms[0]
    db = tmp_path / "many.sqlite"
    with ResultStore(db) as store:
        copies = []
        for i in range(PLAIN_ABOVE + 1):
            spec = base.spec.model_copy(update={"seed": i})
            copies.append(base.model_copy(update={"spec": spec, "key": result_key(spec, base.env)}))
        store.add(copies)
    done = CliRunner().invoke(app, ["results", "--db", str(db)])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Workload"))
    assert "Throughput" in lines[at] and "┃" not in done.stdout  # no rich box
    rows = lines[at + 2 : at + 3 + PLAIN_ABOVE]
    assert all(row.startswith(base.spec.workload) for row in rows)
    # Right after the settings, whose width varies (seed=0 ... seed=1000), the numbers of
    # the next column end where its header ends.
    end = lines[at].index(LAST_EPOCH) + len(LAST_EPOCH)
    assert all(row[end - 1] != " " and row[end] == " " for row in rows)
    few = CliRunner().invoke(app, ["results", "--db", str(db), "--limit", "3"])
    assert "┃" in few.stdout  # a short table is still laid out by rich
