"""The serve scenario's own verdict rules (Scenario.verdict_rules): a rate met the SLO, the
server kept up with the requests sent, with enough of them for its p99s, and none failed."""

from __future__ import annotations

from accelbench.analysis.validity import OVERLOAD_FRAC, Flag, percentile_short
from accelbench.records.result import Result
from accelbench.scenarios.base import record_of
from accelbench.scenarios.serve.record import ServeMetrics, ServeTrial


def keeps_up(t: ServeTrial) -> bool:
    """Whether a serve trial's answers ended at OVERLOAD_FRAC or more of the rate its requests
    were sent at (realised, not nominal); records without the realised rates compare the rate
    answered with the nominal one."""
    if t.sent_per_s is not None and t.ended_per_s is not None:
        return t.ended_per_s >= OVERLOAD_FRAC * t.sent_per_s
    return t.requests_per_s >= OVERLOAD_FRAC * (t.rate_per_s or 0.0)


def serve_flags(result: Result) -> list[tuple[Flag, str]]:
    """The serve scenario's rules: a rate met the SLO, with enough requests for its p99s."""
    serve = record_of(result, ServeMetrics)
    return [] if serve is None else _serve_flags(serve)


def _serve_flags(serve: ServeMetrics) -> list[tuple[Flag, str]]:
    if serve.reported is None:
        return [(Flag.TOO_SLOW, f"no rate tried met the SLO ({serve.search})")]
    trial = serve.trials[serve.reported]
    flags = []
    overs = len(trial.requests) - trial.num_within
    if why := percentile_short(len(trial.requests), overs, "requests", "raise --num-queries"):
        flags.append((Flag.TOO_SHORT, why))
    if not keeps_up(trial):
        sent = trial.sent_per_s or trial.rate_per_s or 0.0
        ended = trial.ended_per_s if trial.sent_per_s is not None else trial.requests_per_s
        flags.append(
            (
                Flag.OVERLOADED,
                f"answers ended at {ended or 0:.4g}/s, requests were sent at {sent:.4g}/s",
            )
        )
    if failed := [r.error for r in trial.requests if r.error]:
        flags.append(
            (Flag.FAILED_REQUESTS, f"{len(failed)} of {len(trial.requests)} failed: {failed[0]}")
        )
    return flags
