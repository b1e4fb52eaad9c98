from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from accelbench.analysis import tuning
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.orchestration import searches
from accelbench.records.result import Result
from accelbench.report import advice as advice_text
from accelbench.report.database import ResultStore

from .test_advice import at

MODEL = Path(__file__).parents[1] / "models" / "bounded.py"
ROOT = Path(__file__).parents[2]


def fake_device(base: Result, fits: int, fastest: int) -> tuple[tuple[list[int]], tuning.Measure]:
    """A device whose memory holds micro batches up to `fits` and whose throughput peaks at
    `fastest`; and the batches it was asked to run, in order."""
    asked: list[int] = []

    def measure(batch: int, replicas: int) -> Result:
        asked.append(batch)
        if batch > fits:
            return Result.new(base.spec.model_copy(update={"batch_size": batch}), base.env, "oom")
        rate = 1000.0 * min(batch, fastest) / fastest - (batch > fastest) * (batch - fastest)
        return at(base, "X", batch, rate * replicas**0.9, replicas=replicas)

    return (asked,), measure


@pytest.mark.parametrize(("fits", "fastest"), [(100, 100), (300, 24), (1000, 6)])
def test_search_finds_the_boundary_and_the_fastest(
    two_platforms: list[Result], fits: int, fastest: int
) -> None:
    (asked,), measure = fake_device(two_platforms[0], fits, fastest)
    found = tuning.search(
        measure, start=1, max_batch=4096, budget=tuning.Budget(60), resolution=0.1
    )
    assert found.largest_fit is not None and found.first_oom is not None
    assert found.largest_fit <= fits < found.first_oom
    assert found.first_oom - found.largest_fit <= max(1, 0.1 * found.largest_fit)
    assert found.fastest is not None and abs(found.fastest - fastest) <= 0.25 * fastest
    assert len(asked) == len(set(asked)) <= 20  # bounded, and no batch measured twice
    assert not found.spent


def test_budget_stops_the_search(two_platforms: list[Result]) -> None:
    (asked,), measure = fake_device(two_platforms[0], 10_000, 4000)
    found = tuning.search(measure, start=1, max_batch=4096, budget=tuning.Budget(0))
    assert found.spent and asked == []


def test_scaling_curve_at_the_fastest_batch(two_platforms: list[Result]) -> None:
    _, measure = fake_device(two_platforms[0], 64, 32)
    found = tuning.search(measure, start=8, budget=tuning.Budget(60), replicas=[1, 2, 4])
    assert sorted(found.scaling) == [2, 4]
    assert {r.spec.batch_size for r in found.scaling.values()} == {found.fastest}


def test_tune_command_searches_in_fresh_processes_and_stores_every_trial(tmp_path: Path) -> None:
    db = tmp_path / "tune.sqlite"
    args = [
        "tune",
        f"{MODEL}:build",
        "--min-batch",
        "16",
        "--max-batch",
        "128",
        "--device",
        "cpu",
        "--epochs",
        "2",
        "--steps-per-epoch",
        "6",
        "--window-steps",
        "1",
        "--budget-s",
        "300",
        "--resolution",
        "0.5",
        "--db",
        str(db),
    ]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    with ResultStore(db) as store:
        trials = {r.spec.batch_size: r.status for r in store.query()}
    # 16, 32 fit and 64 does not (it holds 48): bisection tries 48 (fits) and 56 (does not)
    assert {b: s for b, s in trials.items() if b in (16, 32, 48, 64)} == {
        16: "ok",
        32: "ok",
        48: "ok",
        64: "oom",
    }
    largest = max(b for b, s in trials.items() if s == "ok")
    assert (
        largest == 48
        and f"largest micro batch that fits: 48 (out of memory at {min(b for b, s in trials.items() if s == 'oom')})"
        in out.output
    )
    assert re.search(r"fastest micro batch: \d+, [\d.,]+ samples/s", out.output)  # its unit
    again = CliRunner().invoke(app, args)  # run again: every trial is reused, none re-run
    assert again.output.count("stored earlier, skipped") == len(trials)
    answered = CliRunner().invoke(app, [*args, "--format", "json"])  # the same, as data
    assert answered.exit_code == 0 and answered.stderr.count("stored earlier") == len(trials)
    found = json.loads(answered.stdout)
    schema = json.loads((ROOT / "docs" / "schemas" / "accelbench-tune.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(found)
    (search,) = found["searches"]
    oom = min(b for b, s in trials.items() if s == "oom")
    assert (search["largest_fit"], search["first_oom"]) == (48, oom)
    assert {t["at"]: t["result"]["status"] for t in search["trials"]} == trials


def test_the_replica_curve_is_scaled_like_with_like_only(two_platforms: list[Result]) -> None:
    one = at(two_platforms[0], "X", 32, 1000.0)
    two = at(two_platforms[0], "X", 32, 1800.0, replicas=2)

    def threads(r: Result, n: int) -> Result:
        return r.model_copy(update={"env": r.env.model_copy(update={"torch_num_threads": n})})

    same = tuning.Search(trials={32: threads(one, 1)}, scaling={2: threads(two, 1)})
    assert "1.80x one replica (90% scaling efficiency)" in "\n".join(
        advice_text.tune_lines(same, 64)
    )
    unlike = tuning.Search(trials={32: threads(one, 2)}, scaling={2: threads(two, 1)})
    lines = "\n".join(advice_text.tune_lines(unlike, 64))
    assert "no scaling efficiency: 1 torch thread(s) per replica against 2" in lines
    assert "%" not in lines.split("x2 replicas")[1]  # no efficiency printed for the pair


def test_tune_repeats_each_trial_with_the_threads_given(tmp_path: Path) -> None:
    db = tmp_path / "tune.sqlite"
    args = ["tune", f"{MODEL}:build", "--min-batch", "16", "--max-batch", "16"]
    args += ["--device", "cpu", "--epochs", "2", "--steps-per-epoch", "4", "--window-steps", "1"]
    out = CliRunner().invoke(app, [*args, "--repeats", "2", "--threads", "1", "--db", str(db)])
    assert out.exit_code == 0, out.output
    with ResultStore(db) as store:
        runs = sorted((r.spec.batch_size, r.spec.repeat, r.spec.threads) for r in store.query())
    assert runs == [(16, 0, 1), (16, 1, 1)]  # two fresh-process runs of the one trial


def test_the_searches_run_from_python_as_from_the_command_line(
    two_platforms: list[Result],
) -> None:
    """orchestration.searches holds what `tune` does: a trial is the base spec with fields
    changed; with FSDP each replica count gets a search of its own."""
    (asked,), measure = fake_device(two_platforms[0], 64, 32)

    def trial(**changes: object) -> Result:
        return measure(int(changes["batch_size"]), int(changes["replicas"]))  # type: ignore[call-overload]

    base = two_platforms[0].spec.model_copy(update={"batch_size": 8})
    [(held, found)] = searches.batches(
        base, trial, budget_s=60, max_batch=256, resolution=0.25, replica_counts=[1, 2]
    )
    assert held is None and found.largest_fit == 64 and sorted(found.scaling) == [2]
    assert asked[0] == 8  # from the base's batch up
    sharded = base.model_copy(update={"fsdp": True})
    assert [
        n
        for n, _ in searches.batches(
            sharded, trial, budget_s=60, max_batch=256, resolution=0.25, replica_counts=[1, 2]
        )
    ] == [1, 2]
    inferring = base.model_copy(update={"scenario": "infer"})
    with pytest.raises(AccelbenchError, match="device-count curve is for training"):
        searches.batches(
            inferring, trial, budget_s=60, max_batch=8, resolution=0.25, replica_counts=[1, 2]
        )
