"""Advice from fabricated result sets with known answers: an IPU-like small-batch optimum, a
GPU-like large-batch optimum with an out-of-memory boundary, a latency bound, energy, cost,
time to train and the constraints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.analysis import advice, objectives, validity
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.records.result import Result, result_key
from accelbench.records.stats import summarize
from accelbench.report import advice as advice_text
from accelbench.report.database import ResultStore
from accelbench.scenarios.server import ServerMetrics, ServerTrial

from ..conftest import BUSY_HOST, on_platform, with_rate
from ..report.test_figures import _trained

IPU = {2: 800.0, 4: 1500.0, 8: 2100.0, 16: 2050.0, 32: 1200.0}
GPU = {8: 300.0, 64: 2000.0, 256: 6000.0, 512: 8600.0}


def at(
    base: Result, platform: str, batch: int, rate: float, spread: float = 0.02, **spec: object
) -> Result:
    """`base` as measured on `platform` at this micro batch: `rate` items/s, known to +-spread."""
    assert base.metrics is not None
    return with_rate(on_platform(base, platform, 1.0, batch_size=batch, **spec), rate, spread)


def with_metrics(r: Result, **fields: object) -> Result:
    assert r.metrics is not None
    return r.model_copy(update={"metrics": r.metrics.model_copy(update=fields)})


@pytest.fixture
def chips(two_platforms: list[Result]) -> list[Result]:
    base = two_platforms[0]
    runs = [at(base, "Sim IPU", b, v) for b, v in IPU.items()]
    runs += [at(base, "Sim GPU", b, v) for b, v in GPU.items()]
    gpu_env = runs[-1].env
    oom = Result.new(
        base.spec.model_copy(update={"batch_size": 1024}), gpu_env, "oom", reason="OOM"
    )
    return [*runs, oom]


def test_each_platform_gets_its_own_optimum(chips: list[Result]) -> None:
    gpu, ipu = advice.recommend(chips, "tiny_mlp", "throughput")
    assert (gpu.platform, gpu.options[0].result.spec.batch_size) == ("Sim GPU", 512)
    assert (ipu.platform, ipu.options[0].result.spec.batch_size) == ("Sim IPU", 8)
    assert ipu.batch_range == [8, 16]  # 2,050 is within 5% of 2,100; 1,500 is not
    assert gpu.batch_range == [512]
    assert gpu.gaps is not None and (gpu.gaps.largest_fit, gpu.gaps.first_oom) == (512, 1024)
    # the intervals clear, but each option is one run: never "high" from one run
    assert gpu.confidence is not None and gpu.confidence.level is advice.Level.FEW_RUNS
    assert gpu.confidence.runner_up and gpu.confidence.runner_up.result.spec.batch_size == 256
    assert ipu.confidence is not None and ipu.confidence.level is advice.Level.LOW  # 2,100 vs 2,050
    assert ipu.confidence.runner_up and ipu.confidence.runner_up.result.spec.batch_size == 16
    assert ipu.gaps is not None and not ipu.gaps.larger_untried  # 32 was tried and is slower


def test_a_best_at_the_edge_says_what_was_not_tried(chips: list[Result]) -> None:
    no_oom = [r for r in chips if r.status == "ok"]
    (gpu,) = advice.recommend(
        [r for r in no_oom if r.env.platform == "Sim GPU"], "tiny_mlp", "throughput"
    )
    assert gpu.gaps is not None and gpu.gaps.larger_untried and gpu.gaps.first_oom is None


def test_overlapping_runner_up_is_low_confidence(two_platforms: list[Result]) -> None:
    base = two_platforms[0]
    small, large = at(base, "X", 8, 1000.0), at(base, "X", 16, 1010.0)
    assert small.metrics is not None
    quick = small.metrics.step_ms_steady.model_copy(update={"p99": 0.1})  # a shorter step
    (a,) = advice.recommend(
        [with_metrics(small, step_ms_steady=quick), large], "tiny_mlp", "throughput"
    )
    assert a.options[0].result.spec.batch_size == 16
    assert a.confidence == advice.Confidence(advice.Level.LOW, a.options[1])
    assert a.pareto == []  # training: a shorter step is no trade-off; 16 simply beats 8


def test_latency_bound_picks_the_fastest_within_it(two_platforms: list[Result]) -> None:
    base = next(r for r in two_platforms if r.spec.scenario == "infer")
    runs = []
    for batch, rate, p99 in ((1, 500.0, 2.0), (8, 3000.0, 6.0), (32, 6000.0, 20.0)):
        r = at(base, "Sim GPU", batch, rate)
        assert r.metrics is not None
        known = {"p99": p99, "n": validity.MIN_P99_SAMPLES}  # a p99 with enough batches
        runs.append(
            with_metrics(r, step_ms_steady=r.metrics.step_ms_steady.model_copy(update=known))
        )
    (a,) = advice.recommend(
        runs, "tiny_mlp", "latency", objectives.Constraints(latency_bound_ms=10)
    )
    assert a.options[0].result.spec.batch_size == 8
    assert a.excluded == {advice.Out.LATENCY: 1}
    assert [o.result.spec.batch_size for o in a.pareto] == [8, 1]  # faster vs lower latency
    few = [
        with_metrics(r, step_ms_steady=r.metrics.step_ms_steady.model_copy(update={"n": 99}))
        for r in runs
        if r.metrics
    ]
    (unknown,) = advice.recommend(
        few, "tiny_mlp", "latency", objectives.Constraints(latency_bound_ms=10)
    )
    assert unknown.options == [] and unknown.excluded == {advice.Out.LATENCY: 3}  # p99 not known
    with pytest.raises(AccelbenchError, match="needs --latency-bound-ms"):
        advice.recommend(runs, "tiny_mlp", "latency")


def test_a_server_run_that_held_its_p99_answers_the_latency_objective(
    two_platforms: list[Result],
) -> None:
    """A server run that sustained 480 queries/s at a p99 of 6.1 ms counts for a 10 ms bound,
    beside the inference runs, and is named as the server scenario it is."""
    base = next(r for r in two_platforms if r.spec.scenario == "infer")
    slow = at(base, "Sim GPU", 1, 300.0)  # its batch p99 is unknown (few batches): left out
    held = summarize([6.1] * validity.MIN_P99_SAMPLES)
    trial = ServerTrial(
        target_per_s=500.0, achieved_per_s=480.0, latency_ms=[6.1], latency=held, mean_batch=4.0
    )
    server = with_metrics(
        at(base, "Sim GPU", 8, 480.0, scenario="server", latency_bound_ms=10.0),
        record=ServerMetrics(latency_bound_ms=10.0, trials=[trial], reported=0, search="given"),
    )
    (a,) = advice.recommend(
        [slow, server], "tiny_mlp", "latency", objectives.Constraints(latency_bound_ms=10)
    )
    assert [o.result for o in a.options] == [server] and a.options[0].value == 480.0
    assert a.excluded == {advice.Out.LATENCY: 1}
    lines = advice_text.advice_lines([a], "latency", objectives.Constraints(latency_bound_ms=10))
    assert lines[0].startswith("1. Sim GPU: server bs=8 fp32: 480 items/s")
    (tight,) = advice.recommend(
        [slow, server], "tiny_mlp", "latency", objectives.Constraints(latency_bound_ms=5)
    )
    assert tight.options == [] and tight.excluded == {advice.Out.LATENCY: 2}


def test_energy_never_measured_is_said_so(chips: list[Result]) -> None:
    gpu = [r for r in chips if r.env.platform == "Sim GPU"]
    (a,) = advice.recommend(gpu, "tiny_mlp", "energy")
    assert a.options == [] and a.excluded == {advice.Out.NO_ENERGY: 4}
    (line,) = advice_text.advice_lines([a], "energy", objectives.Constraints())
    assert line == "1. Sim GPU: energy was never measured here: no answer"


def test_energy_and_cost_objectives(chips: list[Result], tmp_path: Path) -> None:
    joules = {8: 0.5, 64: 0.2, 256: 0.25, 512: 0.3}
    gpu = [
        with_metrics(r, joules_per_item=joules[r.spec.batch_size])
        for r in chips
        if r.env.platform == "Sim GPU" and r.status == "ok"
    ]
    (a,) = advice.recommend(gpu, "tiny_mlp", "energy")
    assert a.options[0].result.spec.batch_size == 64
    assert a.options[0].value == pytest.approx(0.2)
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"GPU" = 4.0\n"IPU" = 1.0\n')
    answers = advice.recommend(
        chips, "tiny_mlp", "cost", objectives.Constraints(prices=objectives.load_prices(prices))
    )
    by = {a.platform: a.options[0] for a in answers}
    assert by["Sim GPU"].value == pytest.approx(4.0 / 3600 / 8600 * 1e6)
    assert by["Sim IPU"].value == pytest.approx(1.0 / 3600 / 2100 * 1e6)
    assert answers[0].platform == "Sim GPU"  # 0.129 against 0.132 $ per million items
    only_gpu = objectives.Constraints(prices={"GPU": 4.0})
    ipu = next(
        a for a in advice.recommend(chips, "tiny_mlp", "cost", only_gpu) if a.platform == "Sim IPU"
    )
    assert ipu.options == [] and ipu.excluded == {advice.Out.NO_PRICE: 5}
    prices.write_text('[prices]\n"GPU" = "cheap"\n')
    with pytest.raises(AccelbenchError, match="price of 'GPU' must be a positive number"):
        objectives.load_prices(prices)
    with pytest.raises(AccelbenchError, match="needs --prices FILE"):
        advice.recommend(chips, "tiny_mlp", "cost")


def test_constraints_leave_configurations_out(two_platforms: list[Result]) -> None:
    base = two_platforms[0]
    runs = [
        at(base, "X", 16, 1000.0),
        at(base, "X", 16, 3000.0, replicas=4),
        at(base, "X", 8, 1900.0, replicas=2, grad_accum=2),
    ]
    (a,) = advice.recommend(runs, "tiny_mlp", "throughput", objectives.Constraints(max_devices=2))
    assert a.options[0].result.spec.replicas == 2
    assert a.excluded == {advice.Out.DEVICES: 1}
    (b,) = advice.recommend(runs, "tiny_mlp", "throughput", objectives.Constraints(global_batch=16))
    assert [o.result.spec.replicas for o in b.options] == [1]
    assert len(a.pareto) == 2  # one device vs more throughput on two


def test_time_to_train_uses_the_median_over_seeds(two_platforms: list[Result]) -> None:
    base = two_platforms[0]
    quick = [_trained(at(base, "X", 16, 900.0), s, t) for s, t in ((0, 3.0), (1, 5.0), (2, 4.0))]
    slow = [_trained(at(base, "X", 256, 2000.0), s, t) for s, t in ((0, 9.0), (1, None), (2, 10.0))]
    (a,) = advice.recommend([*quick, *slow], "tiny_mlp", "time-to-train")
    best = a.options[0]
    assert (best.result.spec.batch_size, best.value, best.low, best.high) == (16, 4.0, 3.0, 5.0)
    assert a.confidence and a.confidence.level is advice.Level.HIGH  # 3-5 s against 9 s


def test_recommend_command_prints_evidence(chips: list[Result], tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        for r in chips:
            store.put(r)
    out = CliRunner().invoke(app, ["recommend", "tiny_mlp", "--db", str(db), "--reference"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[1].startswith(
        "1. Sim GPU: bs=512 fp32: 8,600 items/s [8,428 items/s to 8,772 items/s]; from 1 run(s): "
    )
    assert (
        "   confidence: low: one run: its interval clears the runner-up's (bs=256 fp32), but runs "
        "in fresh processes differ by more than a run's interval says; run --repeats 3 for a "
        "sure answer"
    ) in lines
    assert "   not measured: largest micro batch that fit: 512; out of memory at 1024" in lines
    assert "   effective batch range (within 5% of its best throughput): 8, 16" in lines
    assert "across platforms: Sim GPU is best; its interval clears Sim IPU's" in lines
    assert lines[-1] == "no published throughput for this workload"
    bad = CliRunner().invoke(
        app, ["recommend", "tiny_mlp", "--db", str(db), "--objective", "speed"]
    )
    assert bad.exit_code == 2 and "give one of throughput, time-to-train" in bad.output


def test_a_contended_result_is_never_recommended(two_platforms: list[Result]) -> None:
    base = two_platforms[0]
    busy = BUSY_HOST
    quick = at(base, "X", 32, 5000.0)
    runs = [at(base, "X", 16, 1000.0), with_metrics(quick, host=busy)]
    (a,) = advice.recommend(runs, "tiny_mlp", "throughput")
    assert [o.result.spec.batch_size for o in a.options] == [16]
    assert a.excluded == {advice.Out.CONTENDED: 1}
    lines = advice_text.advice_lines([a], "throughput", objectives.Constraints())
    assert (
        "   left out: 1 measured run(s): contended: measured while other work shared the platform"
        in lines
    )


def test_high_confidence_is_earned_by_three_fresh_runs_of_each(chips: list[Result]) -> None:
    gpu = [r for r in chips if r.status == "ok" and r.env.platform == "Sim GPU"]
    repeated = [
        with_rate(r.model_copy(update={"spec": r.spec.model_copy(update={"repeat": i})}), v, 0.01)
        for r in gpu
        for i, v in enumerate((r.items_per_s or 0) * f for f in (0.99, 1.0, 1.01))
    ]
    (a,) = advice.recommend(repeated, "tiny_mlp", "throughput")
    assert a.confidence is not None and a.confidence.level is advice.Level.HIGH
    text = advice_text.advice_lines([a], "throughput", objectives.Constraints())
    assert any(line.startswith("   confidence: high: ") for line in text)
    assert "run-to-run spread 2.0% of the median" in text[0]
    fewer = [r for r in repeated if (r.spec.batch_size, r.spec.repeat) != (512, 2)]
    (two,) = advice.recommend(fewer, "tiny_mlp", "throughput")  # the best: 2 runs
    assert two.confidence is not None and two.confidence.level is advice.Level.FEW_RUNS


def test_advice_reads_runs_once_and_holds_one_whole_record_per_configuration(
    chips: list[Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = [r for r in chips if r.status == "ok" and r.env.platform == "Sim GPU"]
    repeated = [
        with_rate(r.model_copy(update={"spec": spec, "key": result_key(spec, r.env)}), v)
        for r in gpu
        for i, v in enumerate((r.items_per_s or 0) * f for f in (0.99, 1.0, 1.01))
        if (spec := r.spec.model_copy(update={"repeat": i}))
    ]
    (a,) = advice.recommend(iter(repeated), "tiny_mlp", "throughput")  # read once, in order
    best = a.options[0]
    at_512 = [r for r in repeated if r.spec.batch_size == 512]
    assert best.result is at_512[0]  # the first run, whole: what the answer names
    assert [run.key for run in best.runs] == [r.key for r in at_512]
    assert not any(isinstance(run, Result) for o in a.options for run in o.runs)
    assert [run.items_per_s for run in best.runs] == [r.items_per_s for r in at_512]
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.add(repeated)

    def held(*_: object, **__: object) -> None:
        raise AssertionError("recommend held every record")

    monkeypatch.setattr(ResultStore, "query", held)
    out = CliRunner().invoke(app, ["recommend", "tiny_mlp", "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "1. Sim GPU: bs=512 fp32: 8,600 items/s" in out.output


def test_a_drifting_result_is_never_recommended(two_platforms: list[Result]) -> None:
    from tests.analysis.test_comparison import drifted

    base = two_platforms[0]
    runs = [at(base, "X", 16, 1000.0), drifted(at(base, "X", 32, 5000.0))]
    (a,) = advice.recommend(runs, "tiny_mlp", "throughput")
    assert [o.result.spec.batch_size for o in a.options] == [16]
    assert a.excluded == {advice.Out.DRIFTING: 1}


def test_each_framework_at_its_best_is_set_beside_the_best(
    two_platforms: list[Result], tmp_path: Path
) -> None:
    """Which framework serves the objective best on a platform, and by how much: each
    framework's best configuration, the others' ratio to it, not ranked where they overlap."""
    base = two_platforms[0]
    runs = [
        at(base, "X", 8, 1000.0),
        at(base, "X", 32, 1200.0),
        at(base, "X", 8, 500.0, framework="jax"),
        at(base, "X", 32, 600.0, framework="jax"),
        at(base, "X", 32, 1190.0, framework="tensorflow"),
    ]
    (a,) = advice.recommend(runs, "tiny_mlp", "throughput")
    assert [(o.result.spec.framework, o.result.spec.batch_size) for o in a.frameworks] == [
        ("torch", 32),
        ("tensorflow", 32),
        ("jax", 32),
    ]
    lines = advice_text.advice_lines([a], "throughput", objectives.Constraints())
    assert lines[0].startswith("1. X: bs=32 fp32: 1,200 items/s")
    assert (
        "   frameworks, each at its best: torch: bs=32 fp32 1,200 items/s; "
        "tensorflow: bs=32 fp32 1,190 items/s (0.99x torch's, not ranked: the intervals "
        "overlap); jax: bs=32 fp32 600 items/s (0.50x torch's)"
    ) in lines
    (alone,) = advice.recommend(
        [r for r in runs if r.spec.framework == "torch"], "tiny_mlp", "throughput"
    )
    assert alone.frameworks == []
    assert not any(
        "frameworks" in t
        for t in advice_text.advice_lines([alone], "throughput", objectives.Constraints())
    )
    db = tmp_path / "f.sqlite"
    with ResultStore(db) as store:
        store.add(runs)
    out = CliRunner().invoke(app, ["recommend", "tiny_mlp", "--db", str(db), "--format", "json"])
    assert out.exit_code == 0, out.output
    (platform,) = json.loads(out.stdout)["platforms"]
    assert [(c["framework"], c["value"]) for c in platform["frameworks"]] == [
        ("torch", pytest.approx(1200.0)),
        ("tensorflow", pytest.approx(1190.0)),
        ("jax", pytest.approx(600.0)),
    ]
