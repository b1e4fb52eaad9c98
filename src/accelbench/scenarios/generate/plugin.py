"""The generate plug-in: what the core reads of the generate scenario (its columns and words;
its figure and lines in report.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from accelbench.scenarios.base import Figure, Scenario, record_of
from accelbench.scenarios.generate import GenerateMetrics, report
from accelbench.scenarios.settings import Prompts

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


def _columns(result: Result) -> Mapping[str, object]:
    g = record_of(result, GenerateMetrics)
    if g is None:
        return {}
    return {
        "ttft_p50_ms": g.ttft_ms.median,
        "ttft_p99_ms": g.ttft_ms.p99,
        "tpot_p50_ms": g.tpot_ms.median,
        "itl_p50_ms": g.itl_ms.median,
        "itl_p99_ms": g.itl_ms.p99,
        "prefill_tokens_per_s": g.prefill_tokens_per_s,
    }


def _words(spec: RunSpec) -> list[str]:
    own = Prompts.of(spec)
    return [f"prompt={own.prompt_tokens} new={own.new_tokens}"]


SCENARIO = Scenario(
    name="generate",
    settings=Prompts,
    summary="greedy decoding of new_tokens for a batch of prompts, each token timed",
    measure="accelbench.scenarios.generate.measure:measure",
    generates=True,
    record=GenerateMetrics,
    figures=(Figure("generation", report.figure, per_batch=True),),
    notes=report.lines,
    columns=_columns,
    words=_words,
)
