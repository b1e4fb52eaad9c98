from __future__ import annotations

import json
import math
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from accelbench.cell import runner
from accelbench.cli import app
from accelbench.execution.data import HELD_OUT_EVERY, split_loaders
from accelbench.execution.engine import TorchEngine
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.records.targets import parse_target
from accelbench.scenarios.base import record_of
from accelbench.scenarios.time_to_train import EvalPoint, TimeToTrain
from accelbench.scenarios.time_to_train import report as ttt_text
from accelbench.scenarios.time_to_train.measure import outcome
from accelbench.workloads import get

DIGITS = "sklearn:digits"


def ttt(**fields: Any) -> RunSpec:
    base: dict[str, Any] = {
        "workload": "lenet5",
        "scenario": "time-to-train",
        "target": "val_accuracy>=0.8",
        "data": DIGITS,
        "batch_size": 16,
        "lr": 0.05,
        "steps_per_epoch": 10,
        "device": "cpu",
    }
    return RunSpec(**(base | fields))


def test_targets_parse_and_malformed_ones_are_refused() -> None:
    assert parse_target("val_loss<=0.02") == ("val_loss", "<=", 0.02)
    assert parse_target(" val_accuracy >= 9.5e-1 ") == ("val_accuracy", ">=", 0.95)
    for bad in ("loss<=1", "val_loss<0.1", "val_loss<=", "val_loss<=1.2.3", "val_accuracy>=x"):
        with pytest.raises(ValueError, match="is not METRIC<=VALUE"):
            parse_target(bad)
    for never in (
        "val_loss<=-1",
        "val_loss<=0",
        "val_loss>=0.5",
        "val_accuracy>=2",
        "val_accuracy<=0.9",
    ):
        with pytest.raises(ValueError, match="can never be reached"):
            parse_target(never)
    with pytest.raises(ValueError, match="--target goes with --scenario time-to-train"):
        RunSpec.model_validate({"workload": "lenet5", "batch_size": 4, "target": "val_loss<=1"})
    with pytest.raises(ValueError, match="needs a --target"):
        ttt(target=None)
    with pytest.raises(ValueError, match="needs real data"):
        ttt(data=None)
    with pytest.raises(ValueError, match="time-to-train runs one process"):
        ttt(replicas=2)
    assert ttt(grad_accum=2).global_batch == 32  # accumulation is a time-to-train knob


def test_digits_split_holds_out_every_fifth_record() -> None:
    spec = ttt(batch_size=32)
    train, held_out = split_loaders(get("lenet5"), spec, pin_memory=False)
    train_idx, held_idx = train.dataset.indices, held_out.dataset.indices  # type: ignore[attr-defined]
    assert not set(train_idx) & set(held_idx)
    assert len(train_idx) + len(held_idx) == 1797  # scikit-learn's digits, all of them
    assert all(i % HELD_OUT_EVERY == 0 for i in held_idx)
    batch = next(iter(train))
    assert batch["image"].shape == (32, 1, 28, 28)
    assert batch["image"].min() >= 0 and batch["image"].max() <= 1
    assert set(batch["label"].tolist()) <= set(range(10))


def test_linear_scaling_and_warm_up_set_the_learning_rate() -> None:
    spec = RunSpec(
        workload="tiny_mlp",
        batch_size=8,
        grad_accum=4,
        lr=0.1,
        lr_scaling="linear",
        lr_base_batch=64,
        warmup_steps=4,
        device="cpu",
    )
    assert spec.scaled_lr == pytest.approx(0.05)  # 0.1 x 32 / 64
    engine = TorchEngine(get("tiny_mlp"), spec, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    batch = torch.utils.data.default_collate([get("tiny_mlp").make_sample(gen) for _ in range(8)])
    seen = []
    for _ in range(6):
        seen.append(engine.optimizer.param_groups[0]["lr"])
        engine.step([batch] * 4)
    assert seen == pytest.approx([0.0125, 0.025, 0.0375, 0.05, 0.05, 0.05])


def _point(step: int, train_loss: float, val: float = 0.5) -> EvalPoint:
    return EvalPoint(
        step=step,
        train_s=float(step),
        num_items=step,
        data_passes=1.0,
        train_loss=train_loss,
        val_loss=val,
        val_accuracy=None,
    )


def test_outcome_stops_a_runaway_loss_but_not_a_recovered_spike() -> None:
    spec = ttt(target="val_loss<=0.1", max_steps=100)
    # Seed 000's pattern: a huge loss early that comes back down keeps the run going.
    spike = [1.0, 3e7, 2e5, 0.9, 0.8, 0.7]
    assert outcome(spec, spike, _point(6, train_loss=0.85), "val_loss", "<=", 0.1) is None
    kind, reason = outcome(spec, [1.0, 20, 30, 40], _point(4, 25.0), "val_loss", "<=", 0.1)  # type: ignore[misc]
    assert kind == "diverged" and "above 10 x the first step's 1" in reason
    kind, reason = outcome(spec, [1.0, math.nan, 0.5], _point(3, 0.5), "val_loss", "<=", 0.1)  # type: ignore[misc]
    assert (kind, reason) == ("diverged", "loss became nan at step 1")
    assert (
        outcome(spec, [1.0, 0.5], _point(2, 0.5, val=0.05), "val_loss", "<=", 0.1)[0] == "reached"  # type: ignore[index]
    )
    assert outcome(spec, [1.0, 0.5], _point(100, 0.5), "val_loss", "<=", 0.1)[0] == "not-converged"  # type: ignore[index]


@pytest.fixture(scope="module")
def sweep() -> dict[int, Result]:
    """Batch 16 reaches the target; batch 256 cannot in 10 steps (only ~1.8 passes)."""
    return {
        16: runner.run(ttt(batch_size=16, max_steps=600)),
        256: runner.run(ttt(batch_size=256, max_steps=10, steps_per_epoch=5)),
    }


def test_a_batch_sweep_reaches_the_target_at_one_batch_and_not_the_other(
    sweep: dict[int, Result],
) -> None:
    reached, missed = sweep[16], sweep[256]
    assert reached.status == "ok" and missed.status == "not-converged"
    assert missed.reason is not None and "--max-steps budget" in missed.reason
    for result in (reached, missed):
        t = record_of(result, TimeToTrain)
        assert t is not None
        accuracies = [p.val_accuracy or 0 for p in t.curve]
        steps = [p.step for p in t.curve]
        # The run stops at the first evaluation that meets the target, and not before.
        assert all(a < 0.8 for a in accuracies[:-1])
        assert steps == list(
            range(result.spec.steps_per_epoch, steps[-1] + 1, result.spec.steps_per_epoch)
        )
        assert t.num_train_items == 1437 and t.num_held_out_items == 360
        if t.outcome == "reached":
            assert accuracies[-1] >= 0.8
            assert t.time_to_target_s == t.curve[-1].train_s and t.steps_to_target == steps[-1]
            assert t.items_to_target == steps[-1] * 16
            assert t.passes_to_target == pytest.approx(steps[-1] * 16 / 1437)
        else:
            assert accuracies[-1] < 0.8 and steps[-1] == 10 and t.time_to_target_s is None


def test_results_say_whether_the_fastest_batch_is_the_quickest(sweep: dict[int, Result]) -> None:

    reached, missed = sweep[16], sweep[256]
    (line,) = ttt_text.time_to_train_headlines([reached, missed])
    rates = {bs: r.items_per_s or 0 for bs, r in sweep.items()}
    if rates[256] > rates[16]:  # the usual case: the larger batch runs faster but never got there
        assert "the highest throughput, global batch 256" in line
        assert "is not the quickest to train: global batch 16 reaches it in" in line
        assert "it reached the target in 0 of 1 seeds" in line
    else:
        assert "global batch 16" in line and "is also the quickest to train" in line
    table = ttt_text.time_to_train_grid([reached, missed])
    assert table is not None and len(table.rows) == 2


def test_the_training_clock_leaves_evaluation_out(sweep: dict[int, Result]) -> None:
    m = sweep[16].metrics
    t = m.of(TimeToTrain) if m else None
    assert m is not None and t is not None
    assert t.train_s == pytest.approx(sum(e.time_s for e in m.epochs))
    assert t.eval_s > 0 and m.measure_s >= t.train_s + t.eval_s
    assert len(m.step_ms) == len(m.loss) == t.curve[-1].step


def test_a_diverging_configuration_is_stopped_and_flagged() -> None:
    result = runner.run(ttt(lr=1000.0, steps_per_epoch=5, max_steps=200))
    assert result.status == "diverged"
    assert result.reason is not None and re.fullmatch(
        r"loss became (nan|inf) at step \d+", result.reason
    )
    t = record_of(result, TimeToTrain)
    assert t is not None
    assert t.curve[-1].step < 200  # stopped early
    assert t.max_loss > 1e3  # the blow-up stays on record


def test_seeds_and_side_by_side_table_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "ttt.sqlite"
    args = [
        "run",
        "lenet5",
        "--scenario",
        "time-to-train",
        "--target",
        "val_loss<=0.5",
        "--data",
        DIGITS,
        "--batch-size",
        "32",
        "--seeds",
        "2",
        "--lr",
        "0.05",
        "--steps-per-epoch",
        "5",
        "--max-steps",
        "10",
        "--device",
        "cpu",
        "--db",
        str(path),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT status, record FROM results").fetchall()
    seeds = sorted(json.loads(record)["spec"]["seed"] for _, record in rows)
    assert seeds == [0, 1]
    assert "Time to target (s)" in result.output and "2 seeds" in result.output
    reached = sum(status == "ok" for status, _ in rows)
    assert f"{reached}/2" in result.output

    bad = CliRunner().invoke(app, [*args[:5], "val_loss=0.5", *args[6:]])
    assert bad.exit_code == 2 and "is not METRIC<=VALUE" in bad.output


def test_projection_from_throughput_is_marked_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "train.sqlite"
    invoke = CliRunner().invoke
    quick = ["--steps-per-epoch", "8", "--window-steps", "1", "--device", "cpu"]
    assert (
        invoke(app, ["run", "tiny_mlp", "--batch-size", "4", *quick, "--db", str(path)]).exit_code
        == 0
    )
    shown = invoke(
        app, ["results", "--project-epochs", "90", "--epoch-items", "1000", "--db", str(path)]
    )
    assert shown.exit_code == 0, shown.output
    line = next(x for x in shown.output.splitlines() if "projected 90 epochs" in x)
    with sqlite3.connect(path) as db:
        (rate,) = db.execute("SELECT items_per_s FROM results").fetchone()
    hours = float(re.search(r"= ([0-9.e+-]+) h", line).group(1))  # type: ignore[union-attr]
    assert hours == pytest.approx(90 * 1000 / rate / 3600, rel=1e-2)
    assert "not measured" in line
    half = invoke(app, ["results", "--project-epochs", "90", "--db", str(path)])
    assert half.exit_code == 2 and "--epoch-items" in half.output


FORECAST = Path(__file__).parents[2] / "examples" / "forecast.py"


def test_a_user_model_trains_to_target_on_its_own_arrays(tmp_path: Path) -> None:
    """examples/forecast.py reads features.npy and targets.npy; a user model that reads nothing
    is refused before any cell, in one line, where it used to fail inside its cell."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("forecast", FORECAST)
    assert spec is not None and spec.loader is not None
    forecast = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(forecast)
    forecast.write_series(tmp_path / "series", length=512)
    db = tmp_path / "r.sqlite"
    args = ["--scenario", "time-to-train", "--target", "val_loss<=0.05", "--epochs", "20"]
    args += ["--data", str(tmp_path / "series"), "--device", "cpu", "--db", str(db)]
    result = CliRunner().invoke(app, ["run", f"{FORECAST}:build", *args])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        [(status, record)] = conn.execute("SELECT status, record FROM results").fetchall()
    ttt = json.loads(record)["metrics"]["record"]
    assert status == "ok" and ttt["outcome"] == "reached"
    assert ttt["num_held_out_items"] == -(-512 // HELD_OUT_EVERY)  # rows 0, 5, 10, ...

    plain = tmp_path / "plain.py"
    plain.write_text(
        "import torch\nfrom accelbench import Workload\n\ndef build():\n"
        "    return Workload('rows', lambda: torch.nn.Linear(32, 1), "
        "lambda g: {'x': torch.randn(32)}, lambda m, b: m(b['x']).mean())\n"
    )
    db.unlink()
    refused = CliRunner().invoke(app, ["run", f"{plain}:build", *args])
    assert refused.exit_code == 2
    assert refused.output.startswith(f"error: {plain}:build trains on synthetic data only")
    assert refused.output.count("\n") == 1 and not db.exists()
