"""The serve scenario's own knobs: the server, its requests and their arrival, the SLO."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import Field, field_validator

from accelbench.errors import AccelbenchError
from accelbench.scenarios.settings import Arrivals, Prompts

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
