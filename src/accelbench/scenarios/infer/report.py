"""The infer scenario in words (Scenario.notes): a batch's latency percentiles."""

from __future__ import annotations

from collections.abc import Callable

from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.cells import describe
from accelbench.report.inference import p99_text


def latency_lines(result: Result, name: Callable[[RunSpec], str] = describe) -> list[str]:
    """An inference result's latency percentiles, each with the batches behind it."""
    assert result.metrics is not None
    s = result.metrics.step_ms_steady
    return [
        f"{name(result.spec)}: latency per batch p50 {s.median:.2f} ms, p90 {s.p90:.2f} ms, "
        f"{p99_text(s)}, over {s.n} steady batches"
    ]
