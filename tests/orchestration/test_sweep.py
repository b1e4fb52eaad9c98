from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelbench.errors import AccelbenchError
from accelbench.orchestration import launch
from accelbench.orchestration.sweep import grid, load_sweep, run_sweep
from accelbench.records.environment import Environment
from accelbench.records.result import Result, cell_key
from accelbench.report.database import ResultStore

from ..conftest import tiny

AXES = {"batch_size": [2, 4]}
FIXED = {"workload": "tiny_mlp", "epochs": 1, "steps_per_epoch": 3, "device": "cpu"}


def test_sweep_stores_every_cell_then_resumes(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ResultStore(db_path)
    seen: list[tuple[int, bool]] = []

    def record(result: Result, skipped: bool) -> None:
        seen.append((result.spec.batch_size, skipped))

    first = run_sweep(grid(AXES, **FIXED), store, on_result=record)
    assert [r.status for r in first] == ["ok", "ok"]
    assert {r.key for r in store.query()} == {r.key for r in first}

    def must_not_run(*args: object, **kwargs: object) -> Result:
        raise AssertionError("a stored cell was run again")

    monkeypatch.setattr(launch, "run_in_child", must_not_run)
    again = run_sweep(grid(AXES, **FIXED), store, on_result=record)
    assert again == first
    assert seen == [(2, False), (4, False), (2, True), (4, True)]


def test_force_measures_stored_cells_again_beside_what_is_stored(db_path: Path) -> None:
    store = ResultStore(db_path)
    specs = grid({"batch_size": [2]}, **FIXED)
    [first] = run_sweep(specs, store)
    [second] = run_sweep(specs, store, force=True)
    [third] = run_sweep(specs, store, force=True)
    assert [r.spec.repeat for r in (first, second, third)] == [0, 1, 2]
    assert cell_key(second) == cell_key(first) and second.created_at > first.created_at
    # Every measurement stays: the first is read back as it was stored.
    assert [r.key for r in store.query()] == [first.key, second.key, third.key]
    assert store.get(first.key) == first


def test_calls_given_the_same_envs_probe_the_device_once(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probed: list[str] = []
    probe = launch.probe_environment

    def counted(device: str, inputs: object, timeout_s: float) -> Environment:
        probed.append(device)
        return probe(device, inputs, timeout_s)  # type: ignore[arg-type]

    monkeypatch.setattr(launch, "probe_environment", counted)
    store = ResultStore(db_path)
    specs = grid({"batch_size": [2]}, **FIXED)
    envs: dict[str, Environment] = {}
    run_sweep(specs, store, envs=envs)
    run_sweep(specs, store, envs=envs)
    assert probed == ["cpu"]
    run_sweep(specs, store)
    assert probed == ["cpu", "cpu"]


def test_a_failing_cell_does_not_stop_the_sweep(db_path: Path) -> None:
    store = ResultStore(db_path)
    specs = grid({"lr": [1e9, 0.01]}, **FIXED | {"steps_per_epoch": 5, "batch_size": 4})
    results = run_sweep(specs, store)
    assert [r.status for r in results] == ["diverged", "ok"]
    assert sorted(r.status for r in store.query()) == ["diverged", "ok"]


def test_unsupported_precision_fails_before_any_cell(db_path: Path) -> None:
    store = ResultStore(db_path)
    specs = grid({"precision": ["fp32", "tf32"]}, batch_size=4, **FIXED)
    with pytest.raises(AccelbenchError, match="tf32 cannot run"):
        run_sweep(specs, store)
    assert store.query() == []


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_sweep_file_gives_the_grid(tmp_path: Path) -> None:
    sweep = load_sweep(
        write(
            tmp_path / "s.toml",
            """
[fixed]
workload = "tiny_mlp"
epochs = 3
[axes]
batch_size = [10, 128]
precision = ["fp32", "bf16"]
""",
        )
    )
    specs = sweep.specs()
    assert [(s.batch_size, s.precision) for s in specs] == [
        (10, "fp32"),
        (10, "bf16"),
        (128, "fp32"),
        (128, "bf16"),
    ]
    assert {s.epochs for s in specs} == {3}


def test_example_sweep_files_load() -> None:
    examples = Path(__file__).parents[2] / "examples"
    for path in examples.glob("*.toml"):
        assert load_sweep(path).specs()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[fixed]\nwrkload = 'tiny_mlp'\n",
            r"wrkload is not a run setting; did you mean workload\?",
        ),
        ("[axes]\nbatch_size = []\n", "axis batch_size has no values"),
        ("[axes]\nbatch_size = 4\n", r"\[axes.batch_size\] Input should be a valid list"),
        ("[fixed\n", "is not valid TOML"),
        ("[other]\nx = 1\n", r"\[other\] Extra inputs are not permitted"),
    ],
)
def test_bad_sweep_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AccelbenchError, match=message):
        load_sweep(write(tmp_path / "bad.toml", text))


def test_a_setting_cannot_be_fixed_and_an_axis(tmp_path: Path) -> None:
    sweep = load_sweep(
        write(tmp_path / "s.toml", "[fixed]\nbatch_size = 2\n[axes]\nbatch_size = [4]\n")
    )
    with pytest.raises(AccelbenchError, match="batch_size is both fixed and an axis"):
        sweep.specs()


def test_a_cell_that_finishes_within_the_grace_period_is_stored_and_said(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tiny()
    env = launch.probe_environment("cpu")
    finished = Result.new(spec.model_copy(update={"device": "cpu"}), env, "ok")

    def stopped(*_: object) -> Result:
        raise launch.Interrupted("SIGTERM", finished)

    monkeypatch.setattr(launch, "run_in_child", stopped)
    said: list[Result] = []
    with ResultStore(db_path) as store, pytest.raises(launch.Interrupted):
        run_sweep([spec], store, envs={"cpu": env}, on_result=lambda r, _: said.append(r))
    # The cell finished in time, stored like any with the sweep's command line.
    assert said == [finished.model_copy(update={"argv": sys.argv})]
    with ResultStore(db_path, writable=False) as store:
        assert [(r.status, r.argv) for r in store.query()] == [("ok", sys.argv)]
