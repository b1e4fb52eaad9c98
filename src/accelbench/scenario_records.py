"""The sub-records of the scenarios beyond training's steps: the server's rates, time to train's
evaluations and outcome, generation's token timings. result.TrainMetrics holds one of them."""

from __future__ import annotations

from typing import Literal

from accelbench.frozen import Frozen
from accelbench.stats import Summary, wilson_interval

Outcome = Literal["reached", "not-converged", "diverged"]


class ServerTrial(Frozen):
    """Queries sent at one target rate."""

    target_per_s: float
    achieved_per_s: float
    """Queries answered per second, from the first arrival to the last answer."""
    latency_ms: list[float]
    """Raw latency of every query, from its arrival to its batch's answer, in arrival order."""
    latency: Summary
    mean_batch: float
    """Queries per batch the dynamic batcher sent, on average."""


class ServerMetrics(Frozen):
    """The server scenario: the rates tried and the one reported."""

    latency_bound_ms: float | None
    trials: list[ServerTrial]
    reported: int | None
    """Index of the trial reported: the given rate's, or the highest rate whose p99 kept within
    the bound (None: no rate tried kept within it)."""
    search: str
    """How the rates were chosen, in words."""

    @property
    def sustained_per_s(self) -> float | None:
        """Queries answered per second at the reported rate; None where no rate was sustained."""
        return None if self.reported is None else self.trials[self.reported].achieved_per_s


class EvalPoint(Frozen):
    """One evaluation of the held-out split in time-to-train."""

    step: int
    """Optimizer steps done."""
    train_s: float
    """The training clock: time in optimizer steps so far, evaluations left out."""
    num_items: int
    """Training items seen."""
    data_passes: float
    """Passes over the training split."""
    train_loss: float
    """Median training loss of the steps since the previous evaluation."""
    val_loss: float
    val_accuracy: float | None
    """Share of held-out items labelled right (classifiers only)."""


class TimeToTrain(Frozen):
    """The time-to-train scenario: how long training took to reach a held-out target."""

    target: str
    outcome: Outcome
    reason: str
    """What ended the run, in words."""
    time_to_target_s: float | None
    """The training clock at the first evaluation that met the target (None: not reached)."""
    steps_to_target: int | None
    items_to_target: int | None
    passes_to_target: float | None
    train_s: float
    """The training clock when the run ended."""
    eval_s: float
    """Time spent evaluating, outside the training clock."""
    num_train_items: int
    num_held_out_items: int
    lr: float
    """The learning rate reached after warm-up."""
    lr_rule: str
    """How lr was set, in words."""
    max_loss: float
    """Largest finite training loss of any step: a spike that recovered stays on record."""
    max_loss_step: int
    curve: list[EvalPoint]


class GenerateMetrics(Frozen):
    """The generate scenario's token timings (scenarios/generate.py)."""

    prompt_tokens: int
    new_tokens: int
    token_ms: list[list[float]]
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


class ServedRequest(Frozen):
    """One streamed request of the serve scenario, timed on the client."""

    sent_s: float
    """When it was sent, seconds from its trial's start (a Poisson arrival or a client's turn)."""
    prompt_tokens: int | None
    """Prompt tokens as the server counted them (its usage field); None where it gave none."""
    output_tokens: int
    """Tokens generated: the server's usage count, else the streamed chunks that held text."""
    chunk_ms: list[float]
    """Raw: the time from sending to each streamed chunk that held text, ms. A chunk may carry
    several tokens (servers batch their writes), so its gaps are the ITL a user sees."""
    error: str | None = None
    """Why it failed (HTTP status, timeout, a stream that is not OpenAI's); None: it succeeded."""

    @property
    def ttft_ms(self) -> float | None:
        return self.chunk_ms[0] if self.chunk_ms and self.error is None else None

    @property
    def e2el_ms(self) -> float | None:
        return self.chunk_ms[-1] if self.chunk_ms and self.error is None else None

    @property
    def tpot_ms(self) -> float | None:
        """(E2EL - TTFT) / (output tokens - 1); None with fewer than two tokens."""
        if self.ttft_ms is None or self.e2el_ms is None or self.output_tokens < 2:
            return None
        return (self.e2el_ms - self.ttft_ms) / (self.output_tokens - 1)


class ServeTrial(Frozen):
    """Requests sent one way: by a closed loop of clients, or as Poisson arrivals at a rate."""

    rate_per_s: float | None
    """The arrivals' mean rate; None for the closed loop."""
    concurrency: int | None
    """Clients of the closed loop, each sending its next request as its last one ends; None
    for Poisson arrivals, which are not held back."""
    duration_s: float
    """From the first request sent to the last one ended."""
    requests: list[ServedRequest]
    ttft_ms: Summary | None
    tpot_ms: Summary | None
    itl_ms: Summary | None
    e2el_ms: Summary | None
    """Summaries over the requests that succeeded (None where none did, or none had two
    tokens for TPOT and ITL)."""
    requests_per_s: float
    """Requests that succeeded per second of the trial."""
    output_tokens_per_s: float
    goodput_per_s: float
    """Requests per second that succeeded within every target of the SLO."""
    within_slo: float
    """Share of the requests sent that succeeded within every target."""
    sent_per_s: float | None = None
    """The arrival rate realised: (requests - 1) over the span of their send times. A few
    Poisson arrivals stray far from their mean rate (6.33/s nominal was sent at 4/s), so a trial
    is judged by what it sent; None below two requests, and in older records."""
    ended_per_s: float | None = None
    """The rate answers ended, (answers - 1) over the span of their ends: below the realised
    arrival rate when the server fell behind; None below two answers, and in older records."""

    @property
    def num_within(self) -> int:
        return round(self.within_slo * len(self.requests))


class ServeMetrics(Frozen):
    """The serve scenario: what the server called its model, the SLO's rule, and the trials
    (the endpoint and the SLO's targets are the spec's)."""

    server_model: str | None
    """The model as the server's answers name it (None if they did not)."""
    slo_share: float
    """Share of requests that must meet every target for a rate to count as met."""
    trials: list[ServeTrial]
    """The closed loop's steady requests first, then each rate tried, in order."""
    reported: int | None
    """Index of the trial reported: the given rate's, or the highest rate that met the SLO
    (None: no rate tried met it)."""
    search: str
    """How the rates were chosen, in words."""

    @property
    def goodput_per_s(self) -> float | None:
        """Requests per second within the SLO at the reported trial; None where none met it."""
        return None if self.reported is None else self.trials[self.reported].goodput_per_s

    @property
    def goodput_ci(self) -> tuple[float, float] | None:
        """The goodput's 95% interval over the reported trial's requests: Wilson's interval of
        the share within the SLO, times the requests sent per second (the arrivals are taken as
        given: a trial's spread over repeats is the repeats' to show)."""
        if self.reported is None:
            return None
        t = self.trials[self.reported]
        if not t.requests or t.duration_s <= 0:
            return None
        low, high = wilson_interval(t.num_within, len(t.requests))
        per_s = len(t.requests) / t.duration_s
        return low * per_s, high * per_s
