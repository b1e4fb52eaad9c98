from __future__ import annotations

import dataclasses
import gc
import math
import time

import pytest
import torch

from accelbench import workloads
from accelbench.engines import HOST
from accelbench.errors import AccelbenchError
from accelbench.execution.engine import TorchEngine
from accelbench.records import contention, throughput
from accelbench.records.energy import EnergyMetrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios import epochs
from accelbench.scenarios.train import measure as train

from ..conftest import tiny

CPU = torch.device("cpu")


def measure(**overrides: object) -> train.Metrics:
    spec = tiny(**overrides)
    return train.measure(spec, workloads.get(spec.workload), CPU)


def test_epochs_steps_and_steady_state() -> None:
    m = measure(epochs=3, steps_per_epoch=6, window_steps=2, batch_size=8)
    assert len(m.step_ms) == len(m.loss) == 18
    assert [e.index for e in m.epochs] == [1, 2, 3]
    assert all(e.num_items == 48 for e in m.epochs)
    # Epoch 1 holds warm-up; the detector may drop epoch 2 too, if one is left after it.
    assert m.steady_from_step in (6, 12)
    assert m.step_ms_steady.n == 18 - m.steady_from_step
    assert m.window_items_per_s.n == (18 - m.steady_from_step) // 2
    assert m.first_step_ms == m.step_ms[0]
    assert m.timer == "wall-clock"
    # The headline is what the steady epochs' times give, items over seconds, not a median.
    steady = m.epochs[m.steady_from_step // 6 :]
    delivered = sum(e.num_items for e in steady) / sum(e.time_s for e in steady)
    assert m.items_per_s == pytest.approx(delivered, rel=1e-9)
    assert m.delivered.num_items == sum(e.num_items for e in steady)
    assert m.compute_items_per_s is not None and m.compute_items_per_s >= m.items_per_s


def test_one_epoch_skips_only_the_first_step() -> None:
    m = measure(epochs=1, steps_per_epoch=5, window_steps=10)
    assert m.steady_from_step == 1
    assert m.window_items_per_s.n == 1  # fewer steps than a window: one window of all four


def test_gradient_accumulation_counts_the_global_batch() -> None:
    m = measure(batch_size=4, grad_accum=3, epochs=1, steps_per_epoch=2)
    assert m.items_per_step == 12
    assert m.epochs[0].num_items == 24


def test_loader_workers_feed_the_same_steps() -> None:
    m = measure(workers=1, epochs=2, steps_per_epoch=3)
    assert len(m.step_ms) == 6
    assert all(math.isfinite(x) for x in m.loss)


def test_divergence_is_recorded_with_its_step() -> None:
    m = measure(lr=1e9, epochs=2, steps_per_epoch=5)
    assert m.diverged_at_step is not None
    assert not math.isfinite(m.loss[m.diverged_at_step])
    assert all(math.isfinite(x) for x in m.loss[: m.diverged_at_step])
    assert m.items_per_s > 0  # throughput is kept; the status marks it invalid


def test_loss_falls_on_a_learnable_problem() -> None:
    m = measure(epochs=2, steps_per_epoch=30, lr=0.1, batch_size=16)
    first, last = m.epochs[0].loss_mean, m.epochs[-1].loss_mean
    assert first is not None and last is not None and last < first


def test_compile_runs_and_its_first_epoch_is_kept_out_of_the_steady_state() -> None:
    from torch._dynamo.utils import counters

    counters.clear()
    m = measure(compile=True, epochs=2, steps_per_epoch=5, batch_size=8)
    assert counters["stats"]["unique_graphs"] >= 1  # torch.compile captured the model
    assert all(math.isfinite(x) for x in m.loss)
    # Graph capture and code generation are in the first step, inside epoch 1, which the
    # steady state never includes (no timing asserted: the host is shared).
    assert m.steady_from_step >= 5 and m.first_step_ms == m.step_ms[0]


def test_warm_up_left_after_epoch_1_drops_whole_epochs() -> None:
    spec = tiny(epochs=3, steps_per_epoch=16, window_steps=2, batch_size=10)
    slow_start = [50.0] * 16 + [40.0, 40.0, 30.0, 30.0] + [10.0] * 28  # ms: clocks ramping up
    start, windows = epochs.steady_state(spec, slow_start)
    assert start == 32  # epoch 2 is still warming up: the steady state is epoch 3
    assert windows.median == pytest.approx(2 * 10 / 0.020)  # 2 steps of 10 items in 20 ms
    # with no epoch left after the warm-up, the steady state stays epoch 2
    assert epochs.steady_state(spec.model_copy(update={"epochs": 2}), slow_start[:32])[0] == 16


def test_the_headline_counts_what_happens_between_steps() -> None:
    # Steps of 10 ms, but each epoch took 300 ms: 100 ms went to the loader's first batch.
    spec = tiny(epochs=3, steps_per_epoch=20, window_steps=1, batch_size=10)
    raw = epochs.Raw(epoch_s=[0.5, 0.3, 0.3], step_ms=[10.0] * 60)
    start, windows, rate = epochs.delivered(spec, raw)
    assert start == 20
    assert windows.median == pytest.approx(1000.0)  # the median window: 10 items in 10 ms
    assert rate.items_per_s == pytest.approx(400 / 0.6)  # delivered: 400 items in 0.6 s
    assert rate.ci_low is not None and rate.ci_high is not None
    assert rate.ci_low <= rate.items_per_s <= rate.ci_high


def test_the_collector_leaves_out_what_the_process_held_before_its_measurement() -> None:
    # Frozen while the epochs run, so that no pass of the collector walks the framework's
    # objects inside a step; given back after, also where the caller stops early.
    spec = tiny(epochs=3, steps_per_epoch=1)
    before = gc.get_freeze_count()
    inside = [gc.get_freeze_count() for _ in epochs.measured_epochs(spec, HOST, epochs.Raw())]
    assert len(inside) == 3 and min(inside) > before + 10_000  # torch's objects, at least
    assert gc.get_freeze_count() == before
    for _ in epochs.measured_epochs(spec, HOST, epochs.Raw()):
        break
    assert gc.get_freeze_count() == before
    with epochs.frozen_heap():  # a block around them (a serving client's trials) stays frozen
        frozen = gc.get_freeze_count()
        assert frozen > before + 10_000
        assert [
            gc.get_freeze_count() >= frozen
            for _ in epochs.measured_epochs(spec, HOST, epochs.Raw())
        ] == [True] * 3
        assert gc.get_freeze_count() >= frozen
    assert gc.get_freeze_count() == before


def test_epochs_are_added_until_the_steady_state_lasts_long_enough_to_judge() -> None:
    # A default cell of steps well under a millisecond: the default 2 epochs of 20 steps would
    # last a few milliseconds, flagged too-short; epochs are added until 0.25 s.
    spec = RunSpec(workload="tiny_mlp", batch_size=4, device="cpu")
    m = train.measure(spec, workloads.get(spec.workload), CPU)
    assert len(m.epochs) > spec.epochs and m.ci_met is None
    assert m.delivered.time_s >= spec.min_steady_s == contention.MIN_WINDOW_S  # not too-short


def test_ci_target_adds_epochs_until_met() -> None:
    # One epoch leaves 3 steady windows, too few for an interval: the target forces more epochs,
    # until the steady state also lasts long enough to be judged (tiny_mlp's steps take well
    # under a millisecond: a wide target is met long before).
    m = measure(epochs=1, steps_per_epoch=4, window_steps=1, ci_pct=30.0, batch_size=16)
    assert len(m.epochs) > 1
    assert m.ci_met is True
    ci = m.delivered.ci_pct
    assert ci is not None and ci <= 30.0
    assert m.delivered.time_s >= contention.MIN_WINDOW_S


def test_ci_target_out_of_reach_stops_at_the_budget() -> None:
    # Epochs of one step, so that a loaded host still fits more than two in the budget.
    m = measure(epochs=2, steps_per_epoch=1, window_steps=1, ci_pct=1e-6, max_measure_s=2.0)
    assert m.ci_met is False
    assert len(m.epochs) > 2
    assert m.measure_s < 10


def test_flops_counted_and_no_cpu_mfu() -> None:
    m = measure(batch_size=8)
    assert m.flops is not None
    # tiny_mlp: forward 2*(64*128 + 128*10) per item; backward the weight gradients of both
    # layers and the input gradient of the second (the data needs none).
    forward = 2 * (64 * 128 + 128 * 10)
    assert m.flops.per_item == forward + 2 * 64 * 128 + 2 * 2 * 128 * 10
    assert m.flops.floor_per_item == 2 * forward  # forward and the weights' gradients
    assert m.flops.peak_per_s is None and m.flops.peak_source.startswith("none: a CPU's peak")
    assert m.mfu is None
    assert m.flops_per_s == pytest.approx(m.flops.per_item * m.items_per_s)


def test_energy_on_this_cpu_says_how_or_that_it_is_absent() -> None:
    m = measure()
    assert m.energy is not None
    assert m.energy.method in ("rapl", "not available")
    if m.energy.method == "not available":
        assert m.energy.joules is None and m.joules_per_item is None


def test_a_flop_counter_failure_keeps_the_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(self: object, batch: object) -> float:
        raise RuntimeError("an op the counter cannot run")

    monkeypatch.setattr(TorchEngine, "count_flops", fail)
    m = measure()
    assert m.flops is None and m.mfu is None
    assert m.items_per_s > 0


def test_compute_rate_is_not_invented_when_no_compute_time_is_left() -> None:
    spec = tiny(batch_size=10, epochs=1, steps_per_epoch=3)
    energy = EnergyMetrics(method="not available", scope="CPU")

    def compute(wait_ms: list[float]) -> float | None:
        raw = epochs.Raw(
            epoch_s=[0.03], step_ms=[10.0] * 3, wait_ms=wait_ms, step_loss=[1.0] * 3, energy=energy
        )
        m = epochs.build_metrics(
            spec, workloads.get("tiny_mlp"), raw, [], timer="wall-clock", build_s=0.0, flops=None
        )
        return m.compute_items_per_s

    assert compute([0.0, 5.0, 5.0]) == pytest.approx(2 * 10 / 0.010)  # steps 1-2, 10 ms waited
    assert compute([0.0, 10.0, 12.0]) is None


def test_ranks_combine_to_the_slowest_rank_and_the_mean_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = tiny(replicas=2, steps_per_epoch=3, batch_size=4, grad_accum=2)
    energy = EnergyMetrics(method="not available", scope="CPU")
    fast = epochs.Raw(
        epoch_s=[1.0, 0.5],
        step_ms=[100.0, 10.0, 10.0, 10.0, 10.0, 10.0],
        wait_ms=[1.0] * 6,
        step_loss=[2.0] * 6,
        host_rss=1.0,
        energy=energy,
    )
    slow = epochs.Raw(
        epoch_s=[1.2, 0.9],
        step_ms=[90.0, 30.0, 10.0, 40.0, 20.0, 20.0],
        wait_ms=[0.0, 5.0, 0.0, 8.0, 2.0, 2.0],
        step_loss=[4.0] * 6,
        host_rss=2.0,
        energy=energy,
    )
    shared = {"hostname": "h", "local_rank": 0, "numa_node": 0}

    def gather(mine: dict[str, object]) -> list[dict[str, object]]:
        assert mine["raw"]["step_ms"] == fast.step_ms  # type: ignore[index]
        return [mine, shared | {"raw": dataclasses.asdict(slow) | {"energy": energy.model_dump()}}]

    monkeypatch.setattr(train.distributed, "gather", gather)
    combined, ranks = epochs.across_ranks(spec, fast)
    # All from the rank whose epochs took longest (2.1 s against 1.5 s), not per-step maxima,
    # so the stored epoch times reproduce the headline.
    assert combined.step_ms == slow.step_ms and combined.wait_ms == slow.wait_ms
    assert combined.epoch_s == [1.2, 0.9]
    wall = throughput.wall_ms(combined.step_ms, combined.epoch_s, spec.steps_per_epoch)
    assert sum(wall[3:]) == pytest.approx(900.0)  # the steady epoch's stored 0.9 s, exactly
    assert combined.step_loss == [3.0] * 6
    assert combined.host_rss == 2.0
    # Each rank over the headline's window (epoch 2) with its epoch's wall clock: the slowest
    # rank's share of the headline is exactly its rate.
    assert [r.items_per_s for r in ranks] == pytest.approx([3 * 8 / 0.5, 3 * 8 / 0.9])
    headline = throughput.delivered(wall[3:], spec.global_batch).items_per_s
    assert ranks[1].items_per_s * spec.replicas == pytest.approx(headline)
    assert [r.input_wait_frac for r in ranks] == pytest.approx([3 / 500, 12 / 900])
    assert {r.first_steady_step for r in ranks} == {3}


def test_recompute_keeps_the_numbers_and_is_refused_where_absent() -> None:
    args = {"image_size": 32, "num_classes": 4}
    plain, recomputed = (
        train.measure(spec, workloads.get(spec.workload, args), CPU)
        for spec in (
            tiny(workload="timm/resnet18", model_args=args, steps_per_epoch=2, recompute=flag)
            for flag in (False, True)
        )
    )
    # Recomputing activations repeats the same arithmetic: the losses are the same.
    assert recomputed.loss == pytest.approx(plain.loss, rel=1e-4)
    spec = tiny(workload="timm/resnet18", model_args=args, recompute=True)
    assert TorchEngine(workloads.get(spec.workload, args), spec, CPU).eager.grad_checkpointing
    spec = tiny(recompute=True)
    with pytest.raises(AccelbenchError, match="tiny_mlp has no activation checkpointing"):
        TorchEngine(workloads.get(spec.workload), spec, CPU)


def test_the_measuring_budget_is_an_upper_bound() -> None:
    spec = tiny(ci_pct=0.001, max_measure_s=90.0)  # a target no run meets: only time stops it
    raw = epochs.Raw(epoch_s=[30.0, 30.0], step_ms=[10.0] * 60)
    now = time.perf_counter()
    assert not epochs.precise_enough(spec, raw, measure_start=now - 50)  # 50 + 30 <= 90
    assert epochs.precise_enough(spec, raw, measure_start=now - 70)  # 70 + 30 would pass 90
