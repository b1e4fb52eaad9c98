"""The serve scenario's record: every request of every trial, timed on the client, and what
the trials add up to."""

from __future__ import annotations

from collections.abc import Mapping

from accelbench.records.energy import EnergyMetrics
from accelbench.records.frozen import Frozen
from accelbench.records.samples import Samples
from accelbench.records.stats import Summary, wilson_interval
from accelbench.scenarios.base import Record, Series


class ServedRequest(Frozen):
    """One streamed request of the serve scenario, timed on the client."""

    sent_s: float
    """When it was sent, seconds from its trial's start (a Poisson arrival or a client's turn)."""
    prompt_tokens: int | None
    """Prompt tokens as the server counted them (its usage field); None where it gave none."""
    output_tokens: int
    """Tokens generated: the server's usage count, else the streamed chunks that held text."""
    chunk_ms: Samples
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

    energy: EnergyMetrics | None = None
    """What the server's devices drew over the trial (execution.meters.energy.server_meter): its method
    and scope say which counter, or why none; None for the closed loop and older records."""

    @property
    def num_within(self) -> int:
        return round(self.within_slo * len(self.requests))

    @property
    def joules_per_output_token(self) -> float | None:
        """The trial's energy over the tokens its successful requests got."""
        tokens = sum(r.output_tokens for r in self.requests if r.error is None)
        joules = self.energy.joules if self.energy else None
        return joules / tokens if joules is not None and tokens else None

    @property
    def joules_per_request(self) -> float | None:
        """The trial's energy over its successful requests."""
        done = sum(r.error is None for r in self.requests)
        joules = self.energy.joules if self.energy else None
        return joules / done if joules is not None and done else None


class ServeMetrics(Record):
    """The serve scenario: what the server called its model, the SLO's rule, and the trials
    (the endpoint and the SLO's targets are the spec's)."""

    kind: str = "serve"
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
    server_devices: int | None = None
    """The GPUs the server's processes run on, found on this host by NVML (None: a server
    elsewhere or on no GPU): what its rates are set beside published ones per."""

    @property
    def goodput_per_s(self) -> float | None:
        """Requests per second within the SLO at the reported trial; None where none met it."""
        return None if self.reported is None else self.trials[self.reported].goodput_per_s

    def series(self) -> Mapping[str, Series]:
        """The closed loop's output tokens/s and the server's GPUs: what its rates are set
        beside published ones by."""
        found = {}
        if self.trials:
            found["offline"] = Series(self.trials[0].output_tokens_per_s, "tokens/s")
        if self.server_devices is not None:
            found["devices"] = Series(self.server_devices, "devices")
        return found

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
