"""The generate scenario in words (Scenario.notes): its token latencies, each with the calls
or gaps behind it."""

from __future__ import annotations

from collections.abc import Callable

from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.cells import describe, rate_text
from accelbench.report.inference import p99_text
from accelbench.scenarios.base import record_of
from accelbench.scenarios.generate import GenerateMetrics


def lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """A generate result's token latencies, each with the calls or gaps behind it."""
    g, m = record_of(result, GenerateMetrics), result.metrics
    assert g is not None and m is not None
    return [
        f"{name(result.spec)}: TTFT p50 {g.ttft_ms.median:.2f} ms, {p99_text(g.ttft_ms)}, "
        f"over {g.ttft_ms.n} calls; TPOT p50 {g.tpot_ms.median:.2f} ms; ITL p50 "
        f"{g.itl_ms.median:.2f} ms, {p99_text(g.itl_ms)}, over {g.itl_ms.n} gaps; "
        f"{rate_text(m.tokens_per_s or 0)} output tokens/s; prefill "
        f"{rate_text(g.prefill_tokens_per_s)} tokens/s ({g.prompt_tokens} prompt, "
        f"{g.new_tokens} new tokens per sequence)"
        + (
            f"; {m.joules_per_item / g.new_tokens:.3g} J per output token ({m.energy.method})"
            if m.joules_per_item is not None and m.energy is not None
            else ""
        )
    ]
