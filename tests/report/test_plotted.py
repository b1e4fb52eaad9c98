"""The figures drawn from the results report.plotted chooses are the figures drawn from every
result, and a stored report reads only those records for its figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import validity
from accelbench.cli import app
from accelbench.records.result import MEASURED, Result, result_key
from accelbench.report import document, figures, listing, plotted
from accelbench.report.results import listed
from accelbench.report.roles import Point, roles

from ..conftest import BUSY_HOST, SIM_PLATFORM, on_platform, tiny, with_rate
from .test_figures import _quiet, _trained, svg_text
from .test_sections import stored_counting_reads


def keyed(r: Result, **spec: object) -> Result:
    """`r` with `spec` changed, under the key a store gives it."""
    new = r.spec.model_copy(update=spec)
    return r.model_copy(update={"spec": new, "key": result_key(new, r.env)})


@pytest.fixture(scope="module")
def site(two_platforms: list[Result]) -> list[Result]:
    """Every cell of two_platforms measured four times (one repeat on a busy host: flagged; two
    of the simulated platform's metered for energy), a
    line of them at another thread count, three time-to-train seeds, and two generation cells
    with a repeat each: more results than the figures draw, of every kind they choose from."""
    from accelbench.cell.runner import run

    out = []
    for i, r in enumerate(two_platforms):
        if not r.metrics:
            out.append(keyed(r, seed=i))
            continue
        rate = r.items_per_s or 1.0
        for repeat, factor in enumerate((1.0, 0.9, 1.2)):
            again = _quiet(with_rate(r, rate * factor))
            if r.platform == SIM_PLATFORM and repeat:  # energy's median repeat is not MFU's
                assert again.metrics is not None
                metered = again.metrics.model_copy(update={"joules_per_item": 0.1 * repeat})
                again = again.model_copy(update={"metrics": metered})
            out.append(keyed(again, seed=i, repeat=repeat))
        out.append(keyed(_quiet(with_rate(r, rate * 0.3), host=BUSY_HOST), seed=i, repeat=3))
        if r.spec.scenario == "train" and r.spec.replicas == 1:
            out.append(keyed(on_platform(r, None, 0.7, threads=1), seed=i))
    train = next(r for r in two_platforms if r.spec.scenario == "train" and r.metrics)
    out += [
        keyed(_trained(train, s, t), data="sklearn:digits")
        for s, t in ((0, 2.0), (1, 4.0), (2, 3.0))
    ]
    quick = {"prompt_tokens": 8, "new_tokens": 4, "epochs": 2, "steps_per_epoch": 3}
    for b in (1, 4):
        made = run(tiny(workload="llama3_tiny", scenario="generate", batch_size=b, **quick))
        out += [made, keyed(with_rate(made, (made.items_per_s or 1.0) * 1.1), repeat=1)]
    return out


def point(r: Result, verdict: str | None = None) -> Point | None:
    """What the figures choose by, worked out from the whole result (with `verdict`, else its
    own): what a listing keeps must equal it."""
    found = roles(r)
    if not found:
        return None
    if verdict is None:
        verdict = validity.verdict_text(r) if r.status in MEASURED else r.status
    return Point(r.key, r.platform, r.items_per_s, verdict, listing.knobs_of(r.spec), (*found,))


def drawn(
    results: list[Result],
    each: dict[str, list[Result]] | None = None,
    verdicts: dict[str, str] | None = None,
) -> dict[str, tuple[str, str, bytes]]:
    plots = figures.plots(results, each, verdicts)
    return {p.name: (p.title, p.caption, p.render("svg")) for p in plots}


def test_the_chosen_results_draw_the_figures_every_result_draws(site: list[Result]) -> None:
    by_key = {r.key: r for r in site}
    verdicts = listed(site)[0].verdicts  # the table's: a cell's repeats' spread counted
    assert any("noisy" in v for v in verdicts.values())
    points = [point(r, verdicts[r.key]) for r in site]
    each = {name: [by_key[k] for k in keys] for name, keys in plotted.chosen(points).items()}
    assert len({r.key for rs in each.values() for r in rs}) < len(site)
    everything = drawn(site)  # drawn once: each drawing renders every figure
    assert drawn([], each, verdicts) == everything  # byte for byte: every line, point, flag
    assert set(everything) >= {"batch-tiny-mlp-train", "scaling-tiny-mlp", "first-vs-steady"}
    assert {"generation-llama3-tiny", "time-to-train-tiny-mlp"} <= set(everything)
    assert everything["efficiency-tiny-mlp"][0].endswith(
        "joules per item and MFU (%) against batch size"
    )


def test_a_listing_keeps_what_the_figures_choose_by(site: list[Result]) -> None:
    stored = [listing.Listing.loads(listing.of(r).dumps()) for r in site]
    assert [s.plot_point() if s else None for s in stored] == [point(r) for r in site]


def test_a_line_keeps_its_median_repeat_and_the_flagged_ones_it_passed_over(
    two_platforms: list[Result],
) -> None:
    r = next(r for r in two_platforms if r.spec.scenario == "train" and r.metrics)
    assert r.metrics is not None  # one epoch: not a first-epoch bar, which keeps the latest
    r = r.model_copy(
        update={"metrics": r.metrics.model_copy(update={"epochs": r.metrics.epochs[:1]})}
    )
    rates = (100.0, 300.0, 200.0, 50.0)  # the last on a busy host: flagged
    repeats = [
        keyed(_quiet(with_rate(r, v), host=BUSY_HOST if v == 50.0 else None), repeat=i)
        for i, v in enumerate(rates)
    ]
    other = keyed(_quiet(with_rate(r, 400.0)), batch_size=r.spec.batch_size * 2)
    chosen = plotted.chosen(point(r) for r in [*repeats, other])
    assert chosen["batch"] == [repeats[2].key, repeats[3].key, other.key]  # median, flagged
    assert chosen["scaling"] == chosen["batch"]  # other is another line: bs= is on it


def test_a_stored_report_reads_only_the_records_it_draws(
    site: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "site.sqlite"
    every, read = stored_counting_reads(db, site, monkeypatch)
    out = tmp_path / "report.html"
    done = CliRunner().invoke(app, ["report", "--out", str(out), "--db", str(db)])
    assert done.exit_code == 0, done.output
    held = document.page(every, figures.plots(every), [str(db)])
    made = "made [^;]*? by"
    assert _without(out.read_text(), made) == _without(held, made)
    assert len(set(read)) < len(every)


def _without(text: str, pattern: str) -> str:
    import re

    return re.sub(pattern, "", text)


def test_a_noisy_cells_point_is_flagged_in_its_figure_as_in_the_table(
    two_platforms: list[Result],
) -> None:
    """The report's figures and its table judge a point alike: a cell whose repeats spread past
    its target is noisy in both, its point hollow with the flag beside it."""
    r = next(r for r in two_platforms if r.spec.scenario == "train" and r.metrics)
    rates = (100.0, 130.0, 80.0)
    repeats = [keyed(_quiet(with_rate(r, v)), repeat=i) for i, v in enumerate(rates)]
    other = keyed(_quiet(with_rate(r, 150.0)), batch_size=r.spec.batch_size * 2)
    rows = listed([*repeats, other])[0]
    assert [rows.verdict_text(row) for row in rows.rows] == ["noisy"] * 3 + ["valid"]
    assert validity.verdict_text(repeats[0]) == "valid"  # alone, a repeat is valid
    (batch,) = [p for p in figures.plots([*repeats, other]) if p.name.startswith("batch-")]
    assert svg_text(batch).count("noisy") == 1  # the cell's median repeat, flagged
