from __future__ import annotations

import math

import pytest
import torch

from accelbench import workloads
from accelbench.scenarios import train

from .conftest import tiny

CPU = torch.device("cpu")


def measure(**overrides: object) -> train.TrainMetrics:
    spec = tiny(**overrides)
    return train.measure(spec, workloads.get(spec.workload), CPU)


def test_epochs_steps_and_steady_state() -> None:
    m = measure(epochs=3, steps_per_epoch=6, window_steps=2, batch_size=8)
    assert len(m.step_ms) == len(m.loss) == 18
    assert [e.index for e in m.epochs] == [1, 2, 3]
    assert all(e.num_items == 48 for e in m.epochs)
    assert m.steady_from_step == 6  # epoch 1 holds warm-up
    assert m.step_ms_steady.n == 12
    assert m.window_items_per_s.n == 6  # 12 steady steps in windows of 2
    assert m.first_step_ms == m.step_ms[0]
    assert m.timer == "wall-clock"
    # the median window rate agrees with the raw step times it came from
    windows = [sum(m.step_ms[i : i + 2]) for i in range(6, 18, 2)]
    rates = sorted(2 * 8 / (ms / 1e3) for ms in windows)
    assert m.items_per_s == pytest.approx((rates[2] + rates[3]) / 2)


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
    assert m.epochs[-1].loss_mean < m.epochs[0].loss_mean


def test_compile_cost_lands_in_the_first_step() -> None:
    m = measure(compile=True, epochs=2, steps_per_epoch=5, batch_size=8)
    assert all(math.isfinite(x) for x in m.loss)
    assert m.first_step_ms > 10 * m.step_ms_steady.median  # graph capture and code generation
    assert m.epochs[0].items_per_s < m.epochs[1].items_per_s
