"""The serve scenario: streamed requests to a running OpenAI-compatible server, timed on the
client (measure.py; endpoint.py speaks the protocol). A client scenario: no model is built,
fed or checked here, and the platform is the server's, as the user names it."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from accelbench import workloads
from accelbench.errors import AccelbenchError
from accelbench.records.energy import EnergyMetrics
from accelbench.records.frozen import Frozen
from accelbench.records.samples import Samples
from accelbench.records.stats import Summary, wilson_interval
from accelbench.scenarios.base import (
    ClientScenario,
    Export,
    Figure,
    Headline,
    Record,
    Series,
    record_of,
)
from accelbench.scenarios.settings import Arrivals, Prompts

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


SLO_PRESETS: dict[str, tuple[float, float]] = {
    "mlperf-llama2-70b": (2000, 200),
    "mlperf-llama2-70b-interactive": (450, 40),
    "mlperf-mixtral-8x7b": (2000, 200),
    "mlperf-llama3.1-405b": (6000, 175),
    "mlperf-llama3.1-405b-interactive": (4500, 80),
    "mlperf-llama3.1-8b": (2000, 100),
    "mlperf-llama3.1-8b-interactive": (500, 30),
    "mlperf-deepseek-r1": (2000, 80),
    "mlperf-deepseek-r1-interactive": (1500, 15),
    "mlperf-gpt-oss-120b": (3000, 80),
    "mlperf-gpt-oss-120b-interactive": (2000, 15),
}
"""`--slo NAME`: (TTFT ms, TPOT ms) at the 99th percentile, MLPerf Inference's Server bounds,
copied from the `ttft_latency` and `tpot_latency` lines of mlcommons/inference,
loadgen/mlperf.conf (commit b66003e10e2db4b8c36a448b0545ec90fcc6e9e9, August 2026; the bounds
of the earlier ones are as they were at commit 001712e)."""


class ServeSettings(Prompts, Arrivals):
    endpoint: str | None = None
    """serve: the base URL of an OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp,
    `transformers serve`), such as http://gpu01:8000."""
    lengths: str | None = None
    """serve: a CSV file of request lengths, columns prompt_tokens,new_tokens, a row drawn at
    random for each request; None: every request has prompt_tokens and new_tokens."""
    slo_ttft_ms: float = Field(default=2000.0, gt=0)
    """serve: a request's time-to-first-token target (default: MLPerf's Llama 2 70B bound)."""
    slo_tpot_ms: float = Field(default=200.0, gt=0)
    """serve: a request's time-per-output-token target (default: MLPerf's Llama 2 70B bound)."""
    burstiness: float = Field(default=1.0, gt=0, le=100)
    """serve: the arrival gaps' gamma shape at a rate: 1, Poisson; below, burstier (the gaps'
    coefficient of variation is 1/sqrt of it), above, steadier (vLLM's --burstiness)."""
    ramp_to_per_s: float | None = Field(default=None, gt=0)
    """serve: with rate_per_s, the arrival rate rises linearly from it to this over each trial's
    num_queries requests (burstiness shapes the gaps): where a server starts to fall behind."""
    trace: str | None = None
    """serve: a CSV of arrivals to replay, columns timestamp_s,prompt_tokens,new_tokens (as
    examples/serve-trace.csv): each request sent at its time with its lengths, in one trial."""
    power_series: str | None = None
    """serve: the server's power for a remote server: a CSV its host logs through the run
    (nvidia-smi's, or time_s,watts), or a Prometheus URL (records.power_series)."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """serve: the environment variable holding the server's API key (vLLM's --api-key, a
    hosted endpoint), sent as a bearer token; the key itself is never stored nor printed."""
    chat: bool = False
    """serve: send each prompt as one user message to /v1/chat/completions (the server applies
    its chat template), not as a prompt to /v1/completions."""
    request_timeout_s: float = Field(default=120.0, gt=0)
    """serve: the longest a request may take, first byte to last, before it counts as an
    error; a server that stops answering never hangs the cell."""

    @classmethod
    def option_fields(cls, option: str, text: str) -> dict[str, Any]:
        """--slo: a preset's name (SLO_PRESETS), or ttft_ms=X,tpot_ms=Y (either or both)."""
        assert option == "slo", option
        if text in SLO_PRESETS:
            ttft_ms, tpot_ms = SLO_PRESETS[text]
            return {"slo_ttft_ms": ttft_ms, "slo_tpot_ms": tpot_ms}
        if text.startswith("mlperf-"):
            raise AccelbenchError(
                f"--slo {text}: no such preset; give one of {', '.join(SLO_PRESETS)}"
            )
        targets: dict[str, Any] = {}
        for pair in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise AccelbenchError(f"--slo {pair!r}: write it as KEY=VALUE")
            if key.strip() not in ("ttft_ms", "tpot_ms") or not _is_number(value):
                raise AccelbenchError(
                    f"--slo {pair}: give ttft_ms=MS and/or tpot_ms=MS, e.g. "
                    "--slo ttft_ms=2000,tpot_ms=200"
                )
            targets[f"slo_{key.strip()}"] = float(value)
        return targets

    @field_validator("endpoint")
    @classmethod
    def _endpoint_form(cls, url: str | None) -> str | None:
        """The base URL, without a trailing / or /v1, which requests add."""
        if url is None:
            return None
        if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
            raise ValueError(f"endpoint {url!r} is not a URL: give http://HOST:PORT")
        return url.rstrip("/").removesuffix("/v1").rstrip("/")


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


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


def _rules(spec: RunSpec) -> None:
    own = ServeSettings.of(spec)
    if own.endpoint is None:
        raise ValueError(
            "serve needs the --endpoint of a running server, such as http://127.0.0.1:8000"
        )
    if not workloads.is_served(spec.workload):
        raise ValueError(
            "serve measures a served/NAME workload through its server (NAME: the model the "
            "server serves)"
        )
    if spec.precision != "fp32" or spec.compile or spec.channels_last or spec.data:
        raise ValueError(
            "serve measures a server as it runs: its precision and compilation are the "
            "server's settings, its data the prompts; leave out --precision, --compile, "
            "--channels-last and --data (--lengths gives the requests' lengths)"
        )
    if own.ramp_to_per_s is not None and own.rate_per_s is None:
        raise ValueError("--ramp-to-per-s ramps from a rate: give --rate-per-s, where it starts")
    if own.trace and (own.rate_per_s or own.lengths or own.burstiness != 1):
        raise ValueError(
            "--trace gives each request's time and lengths: leave out --rate-per-s, "
            "--ramp-to-per-s, --burstiness and --lengths"
        )


def _check(specs: Sequence[RunSpec]) -> None:
    """Each cell's lengths and trace files read, its power series tried, and its server asked
    once for two tokens of its model: a server that is down, not OpenAI-compatible or not
    serving it stops the run here."""
    from accelbench.execution.meters import power_series
    from accelbench.scenarios.serve import endpoint

    own = [ServeSettings.of(s) for s in specs]
    for s in specs:
        workloads.check(s.workload, s.model_args)
    for path in sorted({o.lengths for o in own if o.lengths}):
        endpoint.read_lengths(Path(path))
    for path in sorted({o.trace for o in own if o.trace}):
        endpoint.read_trace(Path(path))
    for source in sorted({o.power_series for o in own if o.power_series}):
        power_series.check(source)  # a file or server that gives no series stops the run here
    asked = {
        (o.endpoint, s.workload, o.api_key_env, o.chat)
        for s, o in zip(specs, own, strict=True)
        if o.endpoint
    }
    for url, name, key, chat in sorted(asked, key=str):
        endpoint.check(url, name.removeprefix("served/"), api_key_env=key, chat=chat)


def _headline(result: Result) -> Headline | None:
    """Requests per second within the SLO at the reported rate, with its interval over its
    requests; None where no rate met the SLO."""
    serve = record_of(result, ServeMetrics)
    if serve is None or serve.goodput_per_s is None:
        return None
    return Headline(serve.goodput_per_s, "requests/s within the SLO", serve.goodput_ci)


def _columns(result: Result) -> Mapping[str, object]:
    serve = record_of(result, ServeMetrics)
    if serve is None:
        return {}
    loop = serve.trials[0]
    found: dict[str, object] = {
        "server_model": serve.server_model,
        "capacity_requests_per_s": loop.requests_per_s,
    }
    if serve.reported is not None:
        t = serve.trials[serve.reported]
        found |= {
            "rate_sent_per_s": t.sent_per_s,
            "within_slo": t.within_slo,
            "output_tokens_per_s": t.output_tokens_per_s,
            "ttft_p99_ms": t.ttft_ms.p99 if t.ttft_ms else None,
            "tpot_p99_ms": t.tpot_ms.p99 if t.tpot_ms else None,
            "joules_per_output_token": t.joules_per_output_token,
            "joules_per_request": t.joules_per_request,
            "serve_energy_method": t.energy.method if t.energy else None,
            "serve_energy_scope": t.energy.scope if t.energy else None,
        }
    return found


def _words(spec: RunSpec) -> list[str]:
    own = ServeSettings.of(spec)
    if own.trace:
        return [f"trace={Path(own.trace).name}"]
    lengths = (
        f"lengths={Path(own.lengths).name}"
        if own.lengths
        else (f"prompt={own.prompt_tokens} new={own.new_tokens}")
    )
    rate = [f"at {own.rate_per_s:g}/s"] if own.rate_per_s else []
    rate += [f"ramping to {own.ramp_to_per_s:g}/s"] if own.ramp_to_per_s else []
    bursts = [f"burstiness {own.burstiness:g}"] if own.burstiness != 1 else []
    return [lengths, *rate, *bursts]


SCENARIO = ClientScenario(
    name="serve",
    summary="streamed requests to the OpenAI-compatible server at `endpoint`",
    measure="accelbench.scenarios.serve.measure:measure",
    settings=ServeSettings,
    rules=_rules,
    check=_check,
    record=ServeMetrics,
    headline=_headline,
    objectives=("goodput",),
    figures=(Figure("serving", "accelbench.scenarios.serve.report:curves"),),
    exports=(
        Export(
            "br0.2",
            "accelbench.scenarios.serve.exports:write",
            takes="serve results",
            writes="serving trial(s) as llm-d reports",
            help="each serving trial as an llm-d benchmark report (schema 0.2), a JSON object "
            "a line; with --out DIR/, a file a report, as llm-d's import reads them",
            files="accelbench.scenarios.serve.exports:files",
        ),
    ),
    verdict_rules="accelbench.scenarios.serve.verdicts:serve_flags",
    notes="accelbench.scenarios.serve.report:lines",
    cell_text="accelbench.scenarios.serve.report:cell_text",
    columns=_columns,
    words=_words,
)
