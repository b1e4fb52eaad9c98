"""The serve plug-in: what the core reads of the serve scenario (its rules, checks, headline,
columns, and its report, verdicts and exports, each in a module of this folder)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench import workloads
from accelbench.scenarios.base import ClientScenario, Export, Figure, Headline, record_of
from accelbench.scenarios.serve import exports, report, verdicts
from accelbench.scenarios.serve.record import ServeMetrics
from accelbench.scenarios.serve.settings import ServeSettings

if TYPE_CHECKING:
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec


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
    figures=(Figure("serving", report.curves),),
    exports=(
        Export(
            "br0.2",
            exports.write,
            takes="serve results",
            writes="serving trial(s) as llm-d reports",
            help="each serving trial as an llm-d benchmark report (schema 0.2), a JSON object "
            "a line; with --out DIR/, a file a report, as llm-d's import reads them",
            files=exports.files,
        ),
    ),
    verdict_rules=verdicts.serve_flags,
    notes=report.lines,
    cell_text=report.cell_text,
    columns=_columns,
    words=_words,
)
