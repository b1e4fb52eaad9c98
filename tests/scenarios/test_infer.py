from __future__ import annotations

import pytest
import torch

from accelbench import workloads
from accelbench.analysis import objectives
from accelbench.cell.runner import run
from accelbench.records.result import Result
from accelbench.report import inference, listing
from accelbench.report import results as results_text
from accelbench.scenarios.infer import measure as infer
from accelbench.scenarios.infer.report import latency_lines

from ..conftest import tiny

CPU = torch.device("cpu")


def test_every_batch_is_timed_to_its_answer() -> None:
    spec = tiny(scenario="infer", batch_size=8, steps_per_epoch=12, window_steps=3)
    m = infer.measure(spec, workloads.get("tiny_mlp"), CPU)
    assert len(m.step_ms) == len(m.loss) == 24 and all(t > 0 for t in m.step_ms)
    assert m.input_wait_frac == 0 and m.timer == "wall-clock"
    # The throughput is delivered: the steady epoch's queries over its seconds, the host's
    # work between batches included, so never above what the latencies alone would give.
    assert m.steady_from_step == 12
    assert m.items_per_s == pytest.approx(96 / m.epochs[1].time_s, rel=1e-9)
    assert m.items_per_s <= 12 * 8 / (sum(m.step_ms[12:]) / 1e3)
    # Latency percentiles stay per batch.
    assert m.step_ms_steady.n == 12 and m.step_ms_steady.max == max(m.step_ms[12:])
    assert m.flops is not None and m.flops.per_item > 0


def test_inference_leaves_weights_alone_and_keeps_inputs_on_the_device_if_asked() -> None:
    spec = tiny(scenario="infer", steps_per_epoch=3, inputs_on_device=True)
    first, again = (infer.measure(spec, workloads.get("tiny_mlp"), CPU) for _ in range(2))
    # No optimizer: the same queries give the same outputs, epoch after epoch.
    assert first.loss[:3] == first.loss[3:] == again.loss[:3]


def test_training_only_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="infer takes no optimizer steps"):
        tiny(scenario="infer", grad_accum=2)


@pytest.fixture(scope="module")
def sweep() -> list[Result]:
    return [
        run(tiny(scenario="infer", batch_size=b, steps_per_epoch=480, window_steps=10))
        for b in (1, 16)
    ]


def test_latency_percentiles_and_too_short_runs(sweep: list[Result]) -> None:
    long_enough = sweep[0]
    assert long_enough.metrics and long_enough.metrics.step_ms_steady.n >= 459
    line = latency_lines(long_enough)[0]
    assert "p99" in line and "not shown" not in line
    short = run(tiny(scenario="infer", steps_per_epoch=20))
    assert "p99 not shown (needs 100)" in latency_lines(short)[0]
    assert any(
        "20 steady batches: a p99 at 99% confidence needs 459 (MLPerf LoadGen's early stopping), 439 more"
        in line
        for line in results_text.notes([short])
    )


def headlines(results: list[Result], latency_bound_ms: float) -> list[str]:
    """The sweep's latency headlines as the results table's notes give them: from listings."""
    rows = results_text.Rows([listing.of(r) for r in results])
    return inference.headlines(rows.rows, latency_bound_ms, rows.name)


def test_headlines_from_a_batch_size_sweep(sweep: list[Result]) -> None:
    small, large = (r.metrics for r in sweep)
    assert small and large
    bound = (small.step_ms_steady.p99 + large.step_ms_steady.p99) / 2
    lines = headlines(sweep, latency_bound_ms=1e9)
    fastest = min(sweep, key=lambda r: r.metrics.step_ms_steady.median)  # type: ignore[union-attr]
    assert (
        f"lowest latency (p50 {fastest.metrics.step_ms_steady.median:.2f} ms) at batch {fastest.spec.batch_size}"  # type: ignore[union-attr]
        in lines[0]
    )
    best = max(sweep, key=lambda r: r.metrics.items_per_s)  # type: ignore[union-attr]
    assert f"infer bs={best.spec.batch_size} fp32: highest throughput with p99 within" in lines[1]
    # A bound only the lower-latency batch meets picks that batch, checked on the raw p99s.
    tight = headlines(sweep, latency_bound_ms=bound)
    within = [r for r in sweep if r.metrics and r.metrics.step_ms_steady.p99 <= bound]
    assert len(within) == 1 and f"bs={within[0].spec.batch_size} fp32: highest" in tight[1]
    nothing = headlines(sweep, latency_bound_ms=0.0)
    assert "no batch size has a p99 latency known to be within 0 ms" in nothing[1]
    # The listings choose as advice does from the whole records.
    advised = [r for r in sweep if objectives.within_latency(r, bound)]
    assert advised == within


def test_counted_flops_see_through_the_encoder_fast_path() -> None:
    # nn.TransformerEncoder in inference runs one fused native op that FlopCounterMode has no
    # formula for; counted naively it gave 640 FLOPs per item for a 14.7M-FLOP encoder.
    from accelbench.workload import Workload

    def build() -> torch.nn.Module:
        layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True)
        return torch.nn.Sequential(
            torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        )

    def sample(gen: torch.Generator) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(16, 64, generator=gen)}

    workload = Workload(
        item_unit="sequences",
        build_model=build,
        make_sample=sample,
        loss=lambda model, b: model(b["x"]).float().mean(),
    )
    spec = tiny(scenario="infer", batch_size=4, steps_per_epoch=2)
    m = infer.measure(spec, workload, CPU)
    assert m.flops is not None and m.flops.floor_per_item is not None
    # per sequence of 16 tokens: each weight of the two layers once per token, attention on top
    assert m.flops.per_item >= 16 * m.flops.floor_per_item
    assert torch.backends.mha.get_fastpath_enabled()  # turned back on after counting


def test_a_p99_below_the_claimable_count_is_called_an_estimate() -> None:
    from accelbench.analysis import validity
    from accelbench.records.stats import summarize
    from accelbench.report.inference import p99_text

    def of(n: int) -> str:
        return p99_text(summarize([float(i) for i in range(n)]))

    assert of(50) == f"p99 not shown (needs {validity.MIN_P99_ESTIMATE})"
    assert of(100).startswith("p99 estimate ") and "(a claim needs 459)" in of(100)
    assert of(459).startswith("p99 ") and "estimate" not in of(459)
