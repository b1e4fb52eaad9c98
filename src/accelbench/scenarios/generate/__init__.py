"""The generate scenario: greedy decoding of new_tokens for a batch of prompts, each token
timed on the host: TTFT, TPOT, ITL and E2EL (measure.py). Its steps are whole generate calls,
its items the batch's sequences and tokens_per_item their new tokens."""

from __future__ import annotations

from accelbench.records.samples import Samples
from accelbench.records.stats import Summary
from accelbench.scenarios.base import Record


class GenerateMetrics(Record):
    """The generate scenario's token timings."""

    kind: str = "generate"
    prompt_tokens: int
    new_tokens: int
    token_ms: list[Samples]
    """Raw: for every call, in order, the time from the call to each new token's arrival on the
    host, ms; the summaries below are of the steady calls'."""
    ttft_ms: Summary
    """Time to first token: the call to its first token (the prefill and one decode step)."""
    tpot_ms: Summary
    """Time per output token after the first: (E2EL - TTFT) / (new tokens - 1), per call."""
    itl_ms: Summary
    """Inter-token latency: every gap between consecutive tokens of a call."""
    e2el_ms: Summary
    """End-to-end latency: the call to its last token."""
    prefill_tokens_per_s: float
    """Prompt tokens of a batch over the median TTFT: the prefill's rate."""
