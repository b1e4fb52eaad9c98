from __future__ import annotations

from accelbench.records.result import Result
from accelbench.report import tables

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
