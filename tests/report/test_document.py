"""The report as a document: the HTML page in a real headless browser, Markdown, and the
`report` command over databases from two machines."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.records.result import Result
from accelbench.report import document, figures, tables
from accelbench.report import results as results_text
from accelbench.report.database import ResultStore

from ..conftest import SIM_PLATFORM

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Chromium (.ci/run installs the Debian package)"
)
PROBE = """<script>
const images = [...document.images];
const drawn = images.filter(i => i.complete && i.naturalWidth > 0).length;
const probe = document.createElement("pre");
probe.id = "probe";
probe.textContent = `${drawn}/${images.length} scripts=${document.scripts.length} title=${document.title}`;
document.body.append(probe);
</script>"""


def two_databases(tmp_path: Path, results: list[Result]) -> list[str]:
    """This machine's results in one database, the simulated platform's in another."""
    paths = [tmp_path / "here.sqlite", tmp_path / "there.sqlite"]
    for path, mine in zip(paths, (True, False), strict=True):
        with ResultStore(path) as store:
            for r in results:
                if (SIM_PLATFORM not in r.env.platform) == mine:
                    store.put(r)
    return [str(p) for p in paths]


def chromium(*args: str) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


@pytest.fixture(scope="module")
def page(two_platforms: list[Result], tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    dbs = two_databases(tmp, two_platforms)
    out = tmp / "report.html"
    result = CliRunner().invoke(app, ["report", "--db", dbs[0], "--db", dbs[1], "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{len(two_platforms)} results, 6 figures" in result.output
    return out


def test_page_is_self_contained_and_escapes_every_name(page: Path) -> None:
    text = page.read_text()
    assert "<script" not in text  # no script of ours, and none from the data
    assert html.escape(SIM_PLATFORM) in text
    assert "Content-Security-Policy" in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing fetched
    assert text.count("<figure") == 6
    assert html.escape("PEARC '22, Table 1") in text  # two device counts: Table 1's layout


@needs_chromium
def test_page_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    # The page as the browser built it: the name stayed text and ran nothing.
    dom = chromium("--dump-dom", page.as_uri())
    assert "<title>accelbench report</title>" in dom and "pwned" not in dom.split("<body")[0]
    assert "<script" not in dom and html.escape(SIM_PLATFORM, quote=False) in dom
    # Every figure decoded into pixels: a probe (in a copy, without the page's script ban)
    # counts the images the browser drew.
    probed = tmp_path / "probed.html"
    text = page.read_text().replace(
        document.CSP,
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'",
    )
    probed.write_text(text.replace("</body>", PROBE + "</body>"))
    probe = re.search(r'<pre id="probe">(.*)</pre>', chromium("--dump-dom", probed.as_uri()))
    assert probe is not None and probe.group(1) == "6/6 scripts=1 title=accelbench report"


@needs_chromium
def test_screenshot_shows_the_plotted_lines(page: Path, tmp_path: Path) -> None:
    import matplotlib.image

    shot = tmp_path / "shot.png"
    chromium("--window-size=1280,5000", f"--screenshot={shot}", page.as_uri())
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (5000, 1280)
    blue, orange = (np.array(c) for c in ((0.122, 0.467, 0.706), (1.0, 0.498, 0.055)))
    for color in (blue, orange):  # tab10's first two series: both platforms' lines are drawn
        near = np.abs(pixels - color).max(axis=-1) < 0.08
        assert near.sum() > 100, f"too few pixels of {color}"  # a line: hundreds; none: 0
    rows_drawn = (pixels.min(axis=(1, 2)) < 0.9).sum()
    assert rows_drawn > 1500  # most of the page is figures and tables, not blank


def test_markdown_tables_escape_markup(two_platforms: list[Result]) -> None:
    text = document.markdown(two_platforms)
    assert "<script>" not in text and "&lt;script>" in text  # no tag can open
    assert text.startswith("**Results (in the layout of PEARC '22, Table 4)**")
    grid = tables.Grid("", ("a", "b"), [("x|y", "1")], frozenset({0}))
    assert tables.markdown(grid).splitlines()[2] == "| x\\|y | 1 |"


def test_report_formats_and_figure_files(two_platforms: list[Result], tmp_path: Path) -> None:
    dbs = two_databases(tmp_path, two_platforms)
    runner = CliRunner()
    both = ["--db", dbs[0], "--db", dbs[1]]
    md = runner.invoke(app, ["report", *both, "--format", "md"])
    assert md.exit_code == 0 and "| Workload | Platform |" in md.output
    csv = runner.invoke(app, ["report", *both, "--format", "csv", "--platform", "Sim"])
    assert csv.exit_code == 0 and len(csv.output.splitlines()) == 1 + 5  # header + sim's cells
    out = tmp_path / "figs"
    done = runner.invoke(
        app, ["report", *both, "--out", str(tmp_path / "r.html"), "--figures", str(out)]
    )
    assert done.exit_code == 0, done.output
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == len(list(out.glob("*.svg"))) == len(figures.plots(two_platforms)) == 6
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)


def test_report_with_nothing_to_show_says_so(tmp_path: Path) -> None:
    ResultStore(tmp_path / "empty.sqlite").close()
    for db, fix in (
        ("empty.sqlite", "run a sweep first"),
        ("none.sqlite", "run a benchmark first"),
    ):
        result = CliRunner().invoke(app, ["report", "--db", str(tmp_path / db)])
        assert result.exit_code == 2
        (line,) = result.output.strip().splitlines()
        assert line.startswith("error: ") and fix in line


def test_the_report_shows_a_cell_once_with_its_runs_counted_and_their_reasons_folded() -> None:
    """A site runs each cell many times: the report's table has a row per cell (the median
    valid run, the one its figure draws) and its notes each reason once, with how many runs
    it holds for; the results listing keeps every run."""
    from accelbench.cell.runner import run

    from ..conftest import BUSY_HOST, tiny, with_rate
    from .test_figures import _quiet
    from .test_plotted import keyed

    base = run(tiny())
    rates = (100.0, 101.0, 99.0, 102.0, 98.0, 100.5, 99.5, 101.5, 98.5)
    runs = [keyed(_quiet(with_rate(base, v)), repeat=i) for i, v in enumerate(rates)]
    runs.append(keyed(_quiet(with_rate(base, 100.2), host=BUSY_HOST), repeat=len(rates)))
    alone = keyed(_quiet(with_rate(base, 55.0)), batch_size=8)
    results = [*runs, alone]

    md = document.markdown(results)
    table = [line for line in md.splitlines() if line.startswith("| tiny\\_mlp")]
    assert len(table) == 2
    assert "Runs (median shown)" in md
    folded = next(line for line in table if line.endswith("| 10 (1 not valid) |"))
    assert folded.startswith("| tiny\\_mlp | train |")  # the cell's, not one run's, name
    assert "| 100 samples/s |" in folded  # the median of the nine valid runs
    assert any(line.endswith("| 1 |") and "| 55 samples/s |" in line for line in table)
    notes = md.split(f"**{document.NOTES}**")[1]
    assert notes.count(": contended: ") == 1 and "(1 of 10 runs)" in notes
    assert "tiny\\_mlp bs=4 fp32: 10 repeats, median 100, 98 to 102 items/s" in notes
    assert len(tables.markdown(results_text.results_grid(results)).splitlines()) == 2 + 11
