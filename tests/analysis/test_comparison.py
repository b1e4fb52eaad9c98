from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import comparison, validity
from accelbench.analysis.comparison import Ranking
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result
from accelbench.report import compare as compare_text
from accelbench.report.database import ResultStore

from ..conftest import BUSY_HOST, SIM_PLATFORM, on_platform, with_rate


def train(results: list[Result], platform_has: str = "") -> list[Result]:
    return [
        r
        for r in results
        if r.spec.scenario == "train"
        and r.status == "ok"
        and r.spec.replicas == 1
        and platform_has in r.env.platform
        and (platform_has or SIM_PLATFORM not in r.env.platform)
    ]


def test_ratio_of_clearly_separated_platforms_is_ranked(two_platforms: list[Result]) -> None:
    # Intervals of +-5%, not this loaded host's: how wide a real run's is is not under test.
    here = [with_rate(r, 1000.0 * (i + 1), 0.05) for i, r in enumerate(train(two_platforms))]
    there = [on_platform(r, "Sim B", 3.0) for r in here]
    found = comparison.ratios([*here, *there], "platform", baseline=here[0].env.platform)
    assert [r.value for r in found] == ["Sim B"] * 3
    for r in found:
        assert r.ratio == pytest.approx(3.0)
        assert r.interval is not None and r.interval[0] > 1  # 3x is outside any overlap here
        assert r.ranking is Ranking.FASTER and compare_text.ranking_text(r) == "Sim B faster"
    (summary,) = comparison.summary(found)
    assert (summary.num_matched, summary.num_faster, summary.num_slower) == (3, 3, 0)
    assert summary.geomean == pytest.approx(3.0)
    (line,) = compare_text.ratio_summary_lines([summary])
    assert line.startswith(f"Sim B against {here[0].env.platform}: 3.00x throughput")


def test_overlapping_intervals_are_not_ranked(two_platforms: list[Result]) -> None:
    here = [with_rate(train(two_platforms)[0], 1000.0, 0.05)]
    w = here[0].metrics.delivered  # type: ignore[union-attr]
    assert w.ci_low is not None and w.ci_low < w.items_per_s
    close = on_platform(here[0], "Sim B", 1 + 0.5 * (w.items_per_s - w.ci_low) / w.items_per_s)
    (r,) = comparison.ratios([here[0], close], "platform", baseline=here[0].env.platform)
    assert r.interval is not None and r.interval[0] < 1 < r.interval[1]
    assert r.ranking is Ranking.OVERLAP
    assert compare_text.ranking_text(r) == "not ranked: intervals overlap"


def test_no_interval_is_never_ranked(two_platforms: list[Result]) -> None:
    here = train(two_platforms)[0]
    assert here.metrics is not None
    bare = with_rate(here, here.metrics.items_per_s, spread=None)
    (r,) = comparison.ratios(
        [bare, on_platform(bare, "Sim B", 10.0)], "platform", baseline=here.env.platform
    )
    assert r.interval is None and r.ranking is Ranking.NO_INTERVAL


def test_repeats_pool_into_one_band(two_platforms: list[Result]) -> None:
    base = with_rate(train(two_platforms)[0], 1000.0, 0.05)
    runs = [on_platform(base, None, f, repeat=i) for i, f in enumerate((1.0, 1.1, 0.9))]
    band = comparison.band(runs)
    assert band.num_runs == 3 and band.median == pytest.approx(base.items_per_s)
    w = base.metrics.delivered  # type: ignore[union-attr]
    assert w.ci_low is not None and w.ci_high is not None
    assert band.low == pytest.approx(0.9 * w.ci_low) and band.high == pytest.approx(1.1 * w.ci_high)


def test_by_spec_field_matches_all_else(two_platforms: list[Result]) -> None:
    here = train(two_platforms)
    found = comparison.ratios(here, "batch_size")
    assert [(r.value, r.baseline) for r in found] == [("16", "4"), ("64", "4")]
    with pytest.raises(AccelbenchError, match="give --by one of platform, workload"):
        comparison.ratios(here, "colour")
    with pytest.raises(AccelbenchError, match="give --baseline one of 4, 16, 64"):
        comparison.ratios(here, "batch_size", baseline="7")


def test_compare_command_across_two_databases(two_platforms: list[Result], tmp_path: Path) -> None:
    here, there = tmp_path / "here.sqlite", tmp_path / "there.sqlite"
    with ResultStore(here) as a, ResultStore(there) as b:
        for i, measured in enumerate(train(two_platforms)):
            r = with_rate(measured, 1000.0 * (i + 1), 0.05)  # known to +-5%: ranked
            a.put(r)
            b.put(on_platform(r, "Sim B", 3.0))
    out = CliRunner().invoke(
        app,
        [
            "compare",
            "--by",
            "platform",
            "--baseline",
            "Sim B",
            "--db",
            str(here),
            "--db",
            str(there),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "0.33x" in out.output and "Sim B faster" in out.output
    assert (
        "against Sim B: 0.33x throughput (geometric mean of the 3 ranked of 3 matched cells)"
        in out.output
    )
    neither = CliRunner().invoke(app, ["compare", "--db", str(here)])
    assert neither.exit_code == 2 and "give --by FIELD" in neither.output


def test_each_cell_defaults_to_its_own_smallest_value(two_platforms: list[Result]) -> None:
    here = train(two_platforms)  # batch 4, 16 and 64 as measured...
    longer = [on_platform(r, None, 1.0, steps_per_epoch=13) for r in here[1:]]  # ...16, 64 at 13
    found = comparison.ratios([*here, *longer], "batch_size")
    assert sorted((r.value, r.baseline) for r in found) == [("16", "4"), ("64", "16"), ("64", "4")]
    given = comparison.ratios([*here, *longer], "batch_size", baseline="4")
    assert sorted((r.value, r.baseline) for r in given) == [("16", "4"), ("64", "4")]
    missing = comparison.unmatched([*here, *longer], "batch_size", baseline="4")
    assert sorted((u.result.spec.batch_size, u.missing_baseline) for u in missing) == [
        (16, "4"),
        (64, "4"),
    ]


def test_a_contended_result_is_never_ranked(two_platforms: list[Result]) -> None:
    here = with_rate(train(two_platforms)[0], 1000.0, 0.05)
    busy = BUSY_HOST
    fast = on_platform(here, "Sim B", 3.0)
    assert fast.metrics is not None
    shared = fast.model_copy(update={"metrics": fast.metrics.model_copy(update={"host": busy})})
    (clear,) = comparison.ratios([here, fast], "platform", baseline=here.env.platform)
    assert clear.ranking is Ranking.FASTER
    (r,) = comparison.ratios([here, shared], "platform", baseline=here.env.platform)
    assert r.ranking is Ranking.CONTENDED and not r.ranking.ranked
    assert compare_text.ranking_text(r).startswith("not ranked: contended")


def test_the_baseline_is_chosen_by_meaning_not_by_spelling(two_platforms: list[Result]) -> None:
    here = with_rate(train(two_platforms)[0], 1000.0, 0.05)
    runs = [here, on_platform(here, None, 1.5, precision="amp-bf16")]
    (r,) = comparison.ratios(runs, "precision")
    assert (r.value, r.baseline) == ("amp-bf16", "fp32")  # not the alphabetical first
    runs = [here, on_platform(here, None, 1.2, compile=True)]
    (r,) = comparison.ratios(runs, "compile")
    assert (r.value, r.baseline) == ("True", "False")


def test_no_summary_ratio_from_pairs_that_were_not_ranked(two_platforms: list[Result]) -> None:
    here = [with_rate(r, 1000.0, None) for r in train(two_platforms)]  # no intervals
    found = comparison.ratios([*here, *(on_platform(r, "Sim B", 1.17) for r in here)], "platform")
    (summary,) = comparison.summary(found)
    assert summary.num_matched == 3 and summary.num_ranked == 0 and summary.geomean is None
    (line,) = compare_text.ratio_summary_lines([summary])
    assert line.endswith("ranked in none of 3 matched cells (see the verdicts): no summary ratio")
    assert "1.17" not in line


def test_cells_level_within_their_intervals_are_counted_and_said(
    two_platforms: list[Result],
) -> None:
    """Two frameworks whose intervals overlap in every cell are level, which the summary says
    rather than "see the verdicts"; beside ranked cells, the level ones are counted too."""
    here = [with_rate(r, 1000.0, 0.05) for r in train(two_platforms)]
    level = [on_platform(r, None, 1.02, framework="tensorflow") for r in here]
    (summary,) = comparison.summary(comparison.ratios([*here, *level], "framework"))
    assert (summary.num_matched, summary.num_level, summary.geomean) == (3, 3, None)
    (line,) = compare_text.ratio_summary_lines([summary])
    assert line == (
        "tensorflow against torch: level in all 3 matched cells (their intervals overlap): "
        "no summary ratio"
    )
    (one,) = comparison.summary(comparison.ratios([here[0], level[0]], "framework"))
    assert compare_text.ratio_summary_lines([one]) == [
        "tensorflow against torch: level in the one matched cell (their intervals overlap): "
        "no summary ratio"
    ]
    bare = with_rate(train(two_platforms)[1], 1000.0, None)  # no interval: not ranked
    unsure = on_platform(bare, None, 1.02, framework="tensorflow")
    (mixed,) = comparison.summary(comparison.ratios([here[0], level[0], bare, unsure], "framework"))
    assert compare_text.ratio_summary_lines([mixed]) == [
        "tensorflow against torch: ranked in none of 2 matched cells (level in 1, see the "
        "verdicts): no summary ratio"
    ]
    faster = on_platform(here[0], None, 0.5, framework="tensorflow")
    found = comparison.ratios([*here, faster, *level[1:]], "framework")
    (summary,) = comparison.summary(found)
    assert (summary.num_slower, summary.num_level) == (1, 2)
    (line,) = compare_text.ratio_summary_lines([summary])
    assert line.endswith("tensorflow faster in 0, torch faster in 1, level in 2")


def test_cells_that_could_not_be_matched_are_said_with_why(two_platforms: list[Result]) -> None:
    here = train(two_platforms)  # batch 4, 16 and 64 at the same steps per epoch
    steps = here[0].spec.steps_per_epoch
    odd = on_platform(here[0], None, 1.0, batch_size=32, steps_per_epoch=steps + 3)
    # Closer to `odd` than any of `here`, but at the same batch: no counterpart, never named.
    twin = on_platform(odd, None, 1.0, lr=0.5)
    alone, _ = comparison.unmatched([*here, odd, twin], "batch_size")
    assert alone.result == (odd.spec, odd.platform) and alone.missing_baseline is None
    assert alone.nearest == (("steps_per_epoch", str(steps + 3), str(steps)),)
    (line,) = compare_text.unmatched_lines([alone], "batch_size")
    assert line.endswith(
        f"not compared: the closest run at another batch_size differs in steps_per_epoch "
        f"{steps + 3} vs {steps}"
    )
    assert comparison.unmatched(here, "batch_size") == []  # every one was matched


def _labelled(result: Result, label: str, factor: float) -> Result:
    """`result` as measured on a cluster labelled `label`, with the same devices and host
    name (two clusters of one GPU model, whose login nodes name their hosts alike)."""
    spec = result.spec.model_copy(update={"platform": label})
    return with_rate(result.model_copy(update={"spec": spec}), 1000.0 * factor, 0.02)


def test_two_clusters_of_one_device_model_are_compared_not_pooled(
    two_platforms: list[Result],
) -> None:
    here = train(two_platforms)
    a = [_labelled(r, "cluster-a", 1.0) for r in here]
    b = [_labelled(r, "cluster-b", 2.0) for r in here]
    device = here[0].env.platform
    assert {r.platform for r in a} == {f"cluster-a ({device})"}
    assert a[0].device_model == device
    found = comparison.ratios([*a, *b], "platform")
    assert len(found) == len(here) and {r.baseline for r in found} == {f"cluster-a ({device})"}
    assert all(r.ratio == pytest.approx(2.0) for r in found)
    # An unlabelled old record still reads as its device model.
    assert here[0].platform == device


def test_unmatched_cells_of_another_scenario_are_not_listed(two_platforms: list[Result]) -> None:
    here = train(two_platforms)
    infer = [r for r in two_platforms if r.spec.scenario == "infer" and r.status == "ok"]
    there = [on_platform(r, "Sim B", 2.0) for r in infer if SIM_PLATFORM not in r.env.platform]
    # Training here, inference there: no like cell elsewhere, so nothing is a near miss.
    assert comparison.unmatched([*here, *there], "platform") == []


def test_the_platform_label_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "juwels")
    cell = ["run", "tiny_mlp", "--steps-per-epoch", "3", "--epochs", "1", "--db", str(db)]
    out = CliRunner().invoke(app, cell)
    assert out.exit_code == 0, out.output
    monkeypatch.setenv("ACCELBENCH_PLATFORM", "juwels-booster")  # before Slurm's name
    out = CliRunner().invoke(app, cell)
    assert out.exit_code == 0, out.output
    with ResultStore(db) as store:
        labels = sorted(r.spec.platform or "" for r in store.query())
    assert labels == ["juwels", "juwels-booster"]  # two platforms, not a result reused


def drifted(result: Result) -> Result:
    """`result` with its steady state slowing down block by block (a rate 25% lower at its end),
    its headline and interval kept."""
    assert result.metrics is not None
    d = result.metrics.delivered
    k = len(d.block_s)
    block_s = [d.time_s / k * (1 + 0.03 * i) for i in range(k)]
    scale = d.time_s / sum(block_s)
    moving = d.model_copy(update={"block_s": [s * scale for s in block_s]})
    return result.model_copy(
        update={"metrics": result.metrics.model_copy(update={"delivered": moving})}
    )


def test_a_drifting_result_is_never_ranked(two_platforms: list[Result]) -> None:
    here = with_rate(train(two_platforms)[0], 1000.0, 0.05)
    fast = drifted(on_platform(here, "Sim B", 3.0))
    assert validity.Flag.DRIFTING in [f for f, _ in validity.verdict(fast)]
    (r,) = comparison.ratios([here, fast], "platform", baseline=here.env.platform)
    assert r.ranking is Ranking.DRIFTING and not r.ranking.ranked
    assert compare_text.ranking_text(r).startswith("not ranked: drifting")


def test_an_unknown_by_names_each_field_it_accepts_once() -> None:
    with pytest.raises(AccelbenchError) as caught:
        comparison.check_by("colour")
    accepted = str(caught.value).split("give --by one of ")[1].split(", ")
    assert "batch_size" in accepted and "framework" in accepted
    assert len(accepted) == len(set(accepted)), "a field named twice"
