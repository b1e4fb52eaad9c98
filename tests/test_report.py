from __future__ import annotations

import io

from rich.console import Console

from accelbench import report
from accelbench.result import Result
from accelbench.runner import run

from .conftest import tiny


def render(results: list[Result]) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(report.table(results))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_invalid_throughput_is_never_shown_as_a_plain_number() -> None:
    ok, diverged = run(tiny()), run(tiny(lr=1e9, steps_per_epoch=5))
    assert ok.metrics and diverged.metrics
    text = render([ok, diverged])
    assert report.rate_text(ok.metrics.items_per_s) in text
    assert f"({report.rate_text(diverged.metrics.items_per_s)})" in text
    lines = report.notes([ok, diverged])
    assert any(
        f"bs={diverged.spec.batch_size} fp32: diverged: loss became" in line for line in lines
    )
    assert lines[-1] == report.NOT_VALID_NOTE


def test_rate_text_keeps_three_digits_for_slow_rates() -> None:
    assert report.rate_text(24.44) == "24.4"
    assert report.rate_text(5833.2) == "5,833"


def test_flat_row_holds_spec_and_headline_metrics() -> None:
    result = run(tiny(grad_accum=2))
    row = report.flat(result)
    assert (row["micro_batch"], row["grad_accum"], row["global_batch"]) == (4, 2, 8)
    assert row["items_per_s"] == result.items_per_s
    assert row["num_steady_steps"] == 8 - result.metrics.steady_from_step  # type: ignore[union-attr]
    header = report.to_csv([result]).splitlines()[0].split(",")
    assert header[:3] == ["key", "created_at", "workload"]


def test_compile_payoff_in_steps() -> None:
    eager = run(tiny(steps_per_epoch=12))
    assert eager.metrics is not None
    fast_steps = eager.metrics.step_ms_steady.model_copy(
        update={"median": eager.metrics.step_ms_steady.median - 0.5}
    )
    compiled = eager.model_copy(
        update={
            "spec": eager.spec.model_copy(update={"compile": True}),
            "metrics": eager.metrics.model_copy(
                update={
                    "first_step_ms": eager.metrics.first_step_ms + 1000.0,
                    "step_ms_steady": fast_steps,
                }
            ),
        }
    )
    line = next(n for n in report.notes([eager, compiled]) if "torch.compile" in n)
    assert (
        "costs 1.0 s more in the first step and saves 0.50 ms per step: it pays off after 2,000 steps"
        in line
    )
    slower = compiled.model_copy(
        update={"metrics": eager.metrics.model_copy(update={"first_step_ms": 5.0})}
    )
    assert report.compile_payoff(slower, eager).endswith("it never pays off here")


def test_mfu_above_a_hundred_percent_is_called_meaningless() -> None:
    result = run(tiny())
    assert result.metrics is not None and result.metrics.flops is not None
    low_peak = result.metrics.flops.model_copy(
        update={"peak_per_s": 1.0, "peak_source": "measured: x"}
    )
    inflated = result.model_copy(
        update={"metrics": result.metrics.model_copy(update={"flops": low_peak})}
    )
    assert not any("above 100%" in line for line in report.notes([result]))
    (line,) = [line for line in report.notes([inflated]) if "above 100%" in line]
    assert "the peak (measured: x) is below what the model reached" in line
