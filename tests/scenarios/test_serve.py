"""The serve scenario against a real `transformers serve` on a tiny random-weight Llama, and
against servers that are down, answer garbage or never answer."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import itertools
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx
import pytest
from typer.testing import CliRunner

from accelbench.analysis import advice, validity
from accelbench.cli import app
from accelbench.engines import HOST
from accelbench.execution.meters.energy import CounterMeter, server_meter
from accelbench.execution.meters.host import HostMonitor, server_pids
from accelbench.records.energy import EnergyMetrics
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report import cells
from accelbench.report.database import ResultStore
from accelbench.scenarios.base import record_of
from accelbench.scenarios.serve import (
    ServedRequest,
    ServeMetrics,
    ServeSettings,
    endpoint,
    verdicts,
)
from accelbench.scenarios.serve import measure as serve
from accelbench.scenarios.serve import report as serving

runner = CliRunner()
NEW_TOKENS = 6
QUICK = [
    "--scenario",
    "serve",
    "--batch-size",
    "2",
    "--epochs",
    "2",
    "--steps-per-epoch",
    "2",
    "--min-steady-s",
    "0",
    "--prompt-tokens",
    "12",
    "--new-tokens",
    str(NEW_TOKENS),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tiny_llama(out: Path) -> None:
    """A 2-layer Llama with random weights and a byte-level BPE trained here on local text."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator([" ".join(endpoint._WORDS)] * 20, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
    )
    LlamaForCausalLM(config).save_pretrained(out)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(endpoint, model) of `transformers serve` on the tiny Llama, started for these tests."""
    model = tmp_path_factory.mktemp("served") / "tiny-llama"
    tiny_llama(model)
    port = free_port()
    log = (model.parent / "serve.log").open("w")
    command = [str(Path(sys.executable).parent / "transformers"), "serve", str(model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=os.environ | {"HF_HUB_OFFLINE": "1"}
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # a hang guard: it starts in seconds
        while True:
            assert proc.poll() is None, (model.parent / "serve.log").read_text()[-2000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "transformers serve did not start"
            time.sleep(0.5)
        yield url, str(model)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def serve_cells(server: tuple[str, str], db: Path, *args: str) -> tuple[list[Result], str]:
    """Serve cells of the tiny model through the CLI: the stored results and the output."""
    url, model = server
    command = ["run", "--served-model", model, "--endpoint", url, *QUICK, *args]
    out = runner.invoke(app, [*command, "--db", str(db)])
    assert out.exit_code == 0, out.output
    with ResultStore(str(db)) as store:
        return store.query(), out.output


def served_spec(**fields: object) -> RunSpec:
    return RunSpec.model_validate(
        {"workload": "served/m", "scenario": "serve", "endpoint": "http://h:1", "batch_size": 1}
        | fields
    )


def test_two_rates_end_to_end_with_every_request_timed(
    server: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, model = server
    db = tmp_path / "r.sqlite"
    two_rates = ["--rate-per-s", "3,6", "--num-queries", "8"]
    label = ["--platform", "this host, transformers serve"]
    results, output = serve_cells(server, db, *two_rates, *label)
    assert sorted(r.spec.knob("rate_per_s") or 0 for r in results) == [3, 6]
    for r in results:
        s = record_of(r, ServeMetrics)
        assert r.status == "ok" and r.metrics and s is not None
        assert r.platform == "this host, transformers serve" != r.env.platform
        assert r.spec.knob("endpoint") == url and s.server_model and model in s.server_model
        loop, rate = s.trials
        assert loop.concurrency == 2 and loop.rate_per_s is None and s.reported == 1
        assert rate.rate_per_s == r.spec.knob("rate_per_s") and len(rate.requests) == 8
        # The headline is the reported rate's goodput: requests within the SLO per second.
        assert r.items_per_s == rate.goodput_per_s <= rate.requests_per_s
        # The closed loop: 2 epochs x 2 steps x 2 requests, its steady epoch the trial.
        assert len(r.metrics.step_ms) == 4 and len(loop.requests) == 4
        for q in [*loop.requests, *rate.requests]:
            assert q.error is None and q.chunk_ms == sorted(q.chunk_ms)
            assert 1 <= q.output_tokens <= NEW_TOKENS and q.prompt_tokens
            if q.output_tokens > 1:
                tpot = (q.chunk_ms[-1] - q.chunk_ms[0]) / (q.output_tokens - 1)
                assert q.tpot_ms == pytest.approx(tpot)
        ttft = sorted(q.chunk_ms[0] for q in rate.requests)
        assert rate.ttft_ms and rate.ttft_ms.min == ttft[0] and rate.ttft_ms.max == ttft[-1]
        gaps = [b - a for q in rate.requests for a, b in itertools.pairwise(q.chunk_ms)]
        assert rate.itl_ms and rate.itl_ms.n == len(gaps)
        # The closed loop's few steps judge nothing of the headline: too-short is the 99%
        # claim's (8 requests), never the capacity phase's, and it is never noisy.
        why = dict(validity.verdict(r))
        assert "MLPerf LoadGen's early stopping" in why[validity.Flag.TOO_SHORT]
        assert validity.Flag.NOISY not in why and cells.last_epoch_text(r) == ""
        assert rate.sent_per_s is not None and r.items_per_s_ci is not None
    assert "goodput" in output and "closed loop of 2" in output
    # The advice: the rate with the most requests within the SLO, on the server's platform
    # (advice leaves out runs measured while the host was busy: not what this test is about).
    monkeypatch.setattr(validity.contention, "contended", lambda host: None)
    workload = results[0].spec.workload
    (answer,) = advice.recommend(results, workload, "goodput")
    assert answer.platform == "this host, transformers serve"
    assert answer.options[0].value == max(r.items_per_s or 0 for r in results)
    said = runner.invoke(app, ["recommend", workload, "--objective", "goodput", "--db", str(db)])
    assert said.exit_code == 0 and "requests/s within the SLO" in said.output, said.output
    plots = list(serving.curves(results))
    assert [p.name for p in plots] == [f"serving-{serving.slug(results[0].spec.workload)}"]
    assert plots[0].render("svg").startswith(b"<?xml")


def test_with_only_targets_a_bisection_finds_the_highest_rate_that_meets_them(
    server: tuple[str, str], tmp_path: Path
) -> None:
    lengths = tmp_path / "lengths.csv"  # each request's lengths drawn from a file
    lengths.write_text("prompt_tokens,new_tokens\n4,2\n40,5\n")
    load = ["--num-queries", "6", "--max-measure-s", "2", "--lengths", str(lengths)]
    targets = ["--slo", "ttft_ms=10000,tpot_ms=10000"]
    ((r,), _) = serve_cells(server, tmp_path / "r.sqlite", *load, *targets)
    s = record_of(r, ServeMetrics)
    assert r.metrics and s is not None
    requests = [q for t in s.trials for q in t.requests]
    assert {q.output_tokens <= 2 for q in requests if (q.prompt_tokens or 0) < 60} == {True}
    assert len({(q.prompt_tokens or 0) < 60 for q in requests}) == 2  # both rows drawn
    assert r.metrics.tokens_per_item is None  # output lengths vary: no tokens per item
    assert len(s.trials) == 1 + serve.SEARCH_TRIALS
    capacity = r.metrics.items_per_s
    rates = [t.rate_per_s for t in s.trials[1:]]
    assert rates[0] == pytest.approx(capacity / 2)
    spec = r.spec
    met = [i for i, t in enumerate(s.trials) if i and serve.meets_slo(spec, t)]
    # The reported trial is the highest rate that met the targets; each later rate lies
    # between the highest that met them and the lowest that did not.
    assert s.reported == (max(met, key=lambda i: s.trials[i].rate_per_s or 0) if met else None)
    for i in range(2, len(s.trials)):
        earlier = s.trials[1:i]
        low = max([t.rate_per_s or 0 for t in earlier if serve.meets_slo(spec, t)], default=0)
        high = min(
            [t.rate_per_s or 0 for t in earlier if not serve.meets_slo(spec, t)], default=capacity
        )
        assert s.trials[i].rate_per_s == pytest.approx((low + high) / 2)
    assert "bisection" in s.search


def test_a_model_the_server_does_not_serve_is_refused_before_any_cell(
    server: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = server
    db = tmp_path / "r.sqlite"
    args = ["run", "--served-model", "no-such-model", "--endpoint", url, *QUICK, "--db", str(db)]
    out = runner.invoke(app, args)
    assert out.exit_code == 2 and "refused model 'no-such-model'" in out.output
    assert "/v1/models lists them" in out.output and not db.exists()


class _Stub(BaseHTTPRequestHandler):
    """A server that is not what it should be: `answer` picks how."""

    answer = "html"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.answer == "hang":  # longer than any test waits: a deadline must end it
            time.sleep(30)
            return
        status = 404 if self.answer == "404" else 200
        self.send_response(status)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html><body>Welcome to nginx!</body></html>\n")

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def stub_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stub server of `handler` on a free loopback port, a thread per request: its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def stub_cell(url: str) -> list[str]:
    """A serve run against a stub: two short epochs, then 4 requests at 50/s."""
    args = ["run", "--served-model", "m", "--scenario", "serve", "--endpoint", url]
    return [
        *args,
        "--epochs",
        "2",
        "--steps-per-epoch",
        "2",
        "--num-queries",
        "4",
        "--rate-per-s",
        "50",
    ]


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    handler = type("Handler", (_Stub,), {})
    with stub_server(handler) as url:
        yield url, handler


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("html", "does not answer as an OpenAI-compatible server"),
        ("404", "has no /v1/completions (HTTP 404"),
    ],
)
def test_a_garbage_endpoint_gives_one_line(
    stub: tuple[str, type[_Stub]], answer: str, says: str, tmp_path: Path
) -> None:
    url, handler = stub
    handler.answer = answer
    db = tmp_path / "r.sqlite"
    out = runner.invoke(app, ["run", "served/m", "--endpoint", url, *QUICK, "--db", str(db)])
    assert out.exit_code == 2 and says in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1 and not db.exists()


def test_a_dead_endpoint_gives_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    out = runner.invoke(
        app, ["run", "served/m", "--endpoint", url, *QUICK, "--db", str(tmp_path / "r.sqlite")]
    )
    assert out.exit_code == 2 and f"no server answers at {url}" in out.output
    assert len(out.output.strip().splitlines()) == 1


def test_a_server_that_never_answers_costs_each_request_its_timeout_not_a_hang(
    stub: tuple[str, type[_Stub]],
) -> None:
    url, handler = stub
    handler.answer = "hang"

    async def ask() -> endpoint.Reply:
        async with endpoint.session() as client:
            return await endpoint.complete(client, url, "m", "hello", 4, timeout_s=0.3)

    reply = asyncio.run(ask())
    assert reply.failure == "timeout" and reply.error == "no whole answer within 0.3 s"
    with pytest.raises(Exception, match=r"no whole two-token answer within 0\.3 s"):
        endpoint.check(url, "m", timeout_s=0.3)


def _request(ttft: float, last: float, tokens: int, error: str | None = None) -> ServedRequest:
    chunks = [ttft + (last - ttft) * i / max(1, tokens - 1) for i in range(tokens)]
    return ServedRequest(
        sent_s=0, prompt_tokens=10, output_tokens=tokens, chunk_ms=chunks, error=error
    )


def test_goodput_counts_the_requests_within_every_target() -> None:
    spec = served_spec(slo_ttft_ms=100, slo_tpot_ms=10)
    requests = [
        _request(50, 50 + 9 * 8, 9),  # TPOT 8 ms: within
        _request(150, 160, 2),  # TTFT over
        _request(50, 50 + 20 * 4, 5),  # TPOT 20 ms: over
        _request(99, 99, 1),  # one token: TTFT alone decides, within
        _request(10, 20, 2, error="HTTP 500: boom"),  # failed: never within
    ]
    t = serve.trial(spec, requests, 2.0, None, duration_s=2.0)
    assert t.within_slo == pytest.approx(2 / 5) and t.goodput_per_s == pytest.approx(1.0)
    assert t.requests_per_s == pytest.approx(2.0) and t.output_tokens_per_s == 17 / 2
    assert t.ttft_ms and t.ttft_ms.n == 4 and t.tpot_ms and t.tpot_ms.n == 3
    assert not serve.meets_slo(spec, t)
    met = serve.trial(spec, requests[:1] * 99 + [requests[1]], 50.0, None, duration_s=2.0)
    assert met.within_slo == 0.99 and serve.meets_slo(spec, met)
    slow = serve.trial(spec, requests[:1] * 100, 100.0, None, duration_s=2.0)  # 50 of 100/s
    assert slow.within_slo == 1 and not serve.meets_slo(spec, slow)


def test_serve_flags_say_what_is_wrong_with_the_reported_rate() -> None:
    spec = served_spec()
    failed = [_request(10, 20, 2)] * 9 + [_request(10, 20, 2, error="HTTP 503: busy")]
    t = serve.trial(spec, failed, 10.0, None, duration_s=2.0)  # 4.5 of 10/s answered
    m = ServeMetrics(
        server_model=None,
        slo_share=0.99,
        trials=[t],
        reported=0,
        search="s",
    )
    flags = dict(verdicts._serve_flags(m))
    assert set(flags) == {
        validity.Flag.TOO_SHORT,
        validity.Flag.OVERLOADED,
        validity.Flag.FAILED_REQUESTS,
    }
    assert flags[validity.Flag.FAILED_REQUESTS] == "1 of 10 failed: HTTP 503: busy"
    none_met = m.model_copy(update={"reported": None})
    assert [f for f, _ in verdicts._serve_flags(none_met)] == [validity.Flag.TOO_SLOW]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["served/m", "--scenario", "serve"], "serve needs the --endpoint"),
        (["tiny_mlp", "--endpoint", "http://h:1"], "--endpoint goes with --scenario serve"),
        (["served/m"], "a served/NAME workload is measured"),
        (["served/m", "--scenario", "serve", "--endpoint", "h:1"], "is not a URL"),
        (
            ["served/m", "--scenario", "serve", "--endpoint", "http://h:1", "--compile"],
            "leave out --precision, --compile",
        ),
        (["served/m", "--served-model", "x"], "not both"),
        (["served/m", "--scenario", "serve", "--slo", "ttft=3"], "give ttft_ms=MS"),
        (["served/m", "--scenario", "serve", "--slo", "ttft_ms"], "write it as KEY=VALUE"),
        (["served/m", "--scenario", "serve", "--slo", "mlperf-gpt-oss"], "no such preset"),
        (["tiny_mlp", "--burstiness", "0.5"], "--burstiness goes with --scenario serve"),
        (["served/m", "--scenario", "serve", "--burstiness", "0"], "for --burstiness"),
    ],
)
def test_bad_serve_settings_get_one_line(args: list[str], says: str, tmp_path: Path) -> None:
    out = runner.invoke(app, ["run", *args, "--db", str(tmp_path / "r.sqlite")])
    assert out.exit_code == 2 and says in out.output, out.output


def test_an_slo_preset_gives_mlperfs_server_bounds() -> None:
    from accelbench.cli.run import _slo
    from accelbench.scenarios.serve import SLO_PRESETS

    assert _slo("mlperf-llama3.1-8b-interactive") == {"slo_ttft_ms": 500, "slo_tpot_ms": 30}
    assert _slo("mlperf-llama2-70b") == {"slo_ttft_ms": 2000, "slo_tpot_ms": 200}
    # MLPerf Inference v6.0's GPT-OSS 120B: TTFT 3000 ms, TPOT 80 ms; interactive 2000 and 15.
    assert _slo("mlperf-gpt-oss-120b") == {"slo_ttft_ms": 3000, "slo_tpot_ms": 80}
    assert SLO_PRESETS["mlperf-gpt-oss-120b-interactive"] == (2000, 15)
    defaults = {f: ServeSettings.model_fields[f].default for f in ("slo_ttft_ms", "slo_tpot_ms")}
    assert SLO_PRESETS["mlperf-llama2-70b"] == tuple(defaults.values())  # the default is one


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("prompt_tokens,new_tokens\n12,4\n30,8\n", None),
        ("prompt,new\n12,4\n", "columns prompt_tokens,new_tokens of whole numbers"),
        ("prompt_tokens,new_tokens\n12,0\n", "each 1 or more"),
        ("prompt_tokens,new_tokens\n", "a row or more"),
    ],
)
def test_a_lengths_file_is_read_or_refused_naming_the_fix(
    text: str, says: str | None, tmp_path: Path
) -> None:
    path = tmp_path / "lengths.csv"
    path.write_text(text)
    if says is None:
        assert endpoint.read_lengths(path) == [(12, 4), (30, 8)]
    else:
        with pytest.raises(Exception, match=says):
            endpoint.read_lengths(path)


def _sent(
    sent_s: float, ttft: float = 10.0, last: float = 20.0, text: bool = True
) -> ServedRequest:
    return ServedRequest(
        sent_s=sent_s,
        prompt_tokens=10,
        output_tokens=2 if text else 0,
        chunk_ms=[ttft, last] if text else [],
        error=None if text else "empty stream: the server answered with no text",
    )


def test_a_rate_is_judged_by_the_arrivals_it_realised_not_its_nominal_rate() -> None:
    spec = served_spec()
    # Ten Poisson arrivals asked for at 6.33/s that came at 4/s (one every 0.25 s), every one
    # answered within 20 ms: the server kept up with what it was sent.
    requests = [_sent(0.25 * i) for i in range(10)]
    t = serve.trial(spec, requests, 6.33, None, duration_s=2.27)
    assert t.sent_per_s == pytest.approx(4.0) and t.ended_per_s == pytest.approx(4.0)
    assert t.requests_per_s < validity.OVERLOAD_FRAC * 6.33  # what the nominal rule rejected
    assert serve.meets_slo(spec, t)
    # Answers that end ever later, one every 0.5 s, fell behind the arrivals.
    behind = [_sent(0.25 * i, last=250.0 * i + 20) for i in range(10)]
    slow = serve.trial(spec, behind, 4.0, None, duration_s=4.5)
    assert slow.ended_per_s == pytest.approx(2.0, rel=0.01) and not serve.meets_slo(spec, slow)


def test_an_empty_stream_is_a_failure_with_its_reason() -> None:
    spec = served_spec()
    requests = [_sent(0.1 * i) for i in range(9)] + [_sent(0.9, text=False)]
    t = serve.trial(spec, requests, 10.0, None, duration_s=1.0)
    assert t.within_slo == pytest.approx(0.9) and t.num_within == 9
    m = ServeMetrics(server_model=None, slo_share=0.99, trials=[t], reported=0, search="s")
    flags = dict(verdicts._serve_flags(m))
    assert flags[validity.Flag.FAILED_REQUESTS].endswith(
        "empty stream: the server answered with no text"
    )


def test_the_slo_claim_needs_loadgens_early_stopping_samples() -> None:
    spec = served_spec()

    def flags(n: int, overs: int) -> dict[validity.Flag, str]:
        requests = [_sent(0.01 * i) for i in range(n - overs)]
        requests += [_sent(0.01 * (n - overs + i), ttft=5000.0) for i in range(overs)]
        t = serve.trial(spec, requests, 100.0, None, duration_s=0.01 * n)
        m = ServeMetrics(server_model=None, slo_share=0.99, trials=[t], reported=0, search="s")
        return dict(verdicts._serve_flags(m))

    assert validity.Flag.TOO_SHORT in flags(100, 0)  # all within, but 63% confidence only
    assert (
        "0 beyond the bound: a p99 at 99% confidence needs 459"
        in flags(458, 0)[validity.Flag.TOO_SHORT]
    )
    assert "1 more" in flags(458, 0)[validity.Flag.TOO_SHORT]
    assert validity.Flag.TOO_SHORT not in flags(459, 0)
    assert "needs 662" in flags(661, 1)[validity.Flag.TOO_SHORT]
    assert validity.Flag.TOO_SHORT not in flags(662, 1)


def test_the_goodput_headline_has_an_interval_over_its_requests() -> None:
    spec = served_spec()
    requests = [_sent(0.01 * i) for i in range(95)] + [_sent(0.95, ttft=5000.0)] * 5
    t = serve.trial(spec, requests, 100.0, None, duration_s=1.0)
    m = ServeMetrics(server_model=None, slo_share=0.99, trials=[t], reported=0, search="s")
    low, high = m.goodput_ci or (0.0, 0.0)
    assert t.goodput_per_s == pytest.approx(95.0)
    assert low < t.goodput_per_s < high <= 100.0


def test_a_server_under_test_on_this_host_is_the_cells_own_work(
    stub: tuple[str, type[_Stub]],
) -> None:

    url, _ = stub  # served by this very process
    assert os.getpid() in server_pids(url)
    assert os.getpid() in server_pids(url.replace("127.0.0.1", "localhost"))
    assert server_pids("http://192.0.2.1:8000") == []  # another host's: not ours
    spec = served_spec(endpoint=url)
    monitor = HostMonitor(spec, HOST)
    assert monitor.subject == server_pids(url)


class _Steady(BaseHTTPRequestHandler):
    """An OpenAI-compatible stub whose every request takes SERVICE_S, in a thread of its own:
    it never queues, so every rate meets any SLO wider than SERVICE_S."""

    SERVICE_S = 0.1
    protocol_version = "HTTP/1.1"

    def keep(self, body: bytes) -> None:
        """What a subclass keeps of each request."""

    def do_POST(self) -> None:
        self.keep(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        time.sleep(self.SERVICE_S / 2)
        for text in ("a", "b"):
            chunk = {"model": "m", "choices": [{"text": text}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
            time.sleep(self.SERVICE_S / 4)
        usage = {"model": "m", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


def test_a_search_on_a_server_that_never_queues_reports_its_highest_rate(
    tmp_path: Path,
) -> None:
    # The bisection halves (0, capacity] by each trial's own verdict, and reports the last rate
    # that met the SLO. A stub that never queues meets every rate on a quiet host, so the
    # search only rises and reports the highest rate tried, within one step (1/64) of the closed
    # loop's capacity; on a loaded host (the stub shares this process's CPUs) a trial may not
    # keep up, and the search must then come down, as the verdicts say.
    db = tmp_path / "r.sqlite"
    with stub_server(_Steady) as url:
        args = ["run", "--served-model", "m", "--scenario", "serve", "--endpoint", url]
        args += ["--batch-size", "1"]
        args += ["--epochs", "2", "--steps-per-epoch", "6", "--num-queries", "12"]
        args += ["--slo", "ttft_ms=5000,tpot_ms=5000", "--db", str(db)]
        out = runner.invoke(app, args)
        assert out.exit_code == 0, out.output
    with ResultStore(db) as store:
        (r,) = store.query()
    s = record_of(r, ServeMetrics)
    assert r.metrics and s is not None
    capacity = r.metrics.items_per_s
    low, high, reported = 0.0, capacity, None
    for index, t in enumerate(s.trials[1:], start=1):
        assert t.rate_per_s == pytest.approx((low + high) / 2)
        if serve.meets_slo(r.spec, t):
            low, reported = (low + high) / 2, index
        else:
            high = (low + high) / 2
    assert len(s.trials) == 1 + serve.SEARCH_TRIALS and s.reported == reported
    if all(serve.meets_slo(r.spec, t) for t in s.trials[1:]):
        top = s.trials[-1].rate_per_s
        assert reported == len(s.trials) - 1
        assert top == pytest.approx(capacity * (1 - 2**-serve.SEARCH_TRIALS))


class _Guarded(_Steady):
    """_Steady behind an API key, as vLLM started with --api-key answers."""

    SERVICE_S = 0.004
    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        given = self.headers.get("authorization", "")
        self.seen.append(given)
        if given != "Bearer s3cret-key":
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(401)
            self.send_header("content-length", "12")
            self.end_headers()
            self.wfile.write(b"Unauthorized")
            return
        super().do_POST()


def test_the_api_key_comes_from_the_environment_and_is_never_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.sqlite"
    with stub_server(_Guarded) as url:
        args = stub_cell(url)
        bare = runner.invoke(app, [*args, "--db", str(db)])
        assert bare.exit_code == 2 and "give --api-key-env NAME" in bare.output
        unset = runner.invoke(app, [*args, "--api-key-env", "SERVE_KEY", "--db", str(db)])
        assert unset.exit_code == 2 and "$SERVE_KEY is not set" in unset.output
        monkeypatch.setenv("SERVE_KEY", "s3cret-key")
        keyed = runner.invoke(app, [*args, "--api-key-env", "SERVE_KEY", "--db", str(db)])
        assert keyed.exit_code == 0, keyed.output
    assert _Guarded.seen[-1] == "Bearer s3cret-key"  # the cell's requests carried it
    assert "s3cret-key" not in keyed.output
    with ResultStore(db) as store:
        (r,) = store.query()
    assert r.status == "ok" and r.spec.knob("api_key_env") == "SERVE_KEY"
    assert b"s3cret-key" not in db.read_bytes()  # nor in the stored record


class _ChatOnly(BaseHTTPRequestHandler):
    """A server of chat completions only, streaming deltas, as OpenAI's chat API does."""

    protocol_version = "HTTP/1.1"
    asked: ClassVar[list[dict[str, object]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if self.path != "/v1/chat/completions":
            self.send_response(404)
            self.send_header("content-length", "9")
            self.end_headers()
            self.wfile.write(b"Not Found")
            return
        self.asked.append(body)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for text in ("Hi", " there"):
            chunk = {"model": "m", "choices": [{"delta": {"content": text}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"model": "m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


def test_chat_completions_are_measured_with_chat(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with stub_server(_ChatOnly) as url:
        args = stub_cell(url)
        plain = runner.invoke(app, [*args, "--db", str(db)])
        assert plain.exit_code == 2 and "has no /v1/completions" in plain.output
        chat = runner.invoke(app, [*args, "--chat", "--db", str(db)])
        assert chat.exit_code == 0, chat.output
    assert all("messages" in body and "prompt" not in body for body in _ChatOnly.asked)
    with ResultStore(db) as store:
        (r,) = store.query()
    requests = [q for t in r.metrics.of(ServeMetrics).trials for q in t.requests]  # type: ignore[union-attr]
    assert r.spec.knob("chat") and all(q.error is None and len(q.chunk_ms) == 2 for q in requests)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_arrivals_have_their_rate_and_the_burstiness_spread(burstiness: float) -> None:
    from accelbench.scenarios.serve.measure import arrival_times

    times = arrival_times(10.0, 20_000, burstiness, "0/10.0")
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(0.1, rel=0.05)  # 10 a second
    cv = statistics.pstdev(gaps) / mean
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.05)  # gamma: 1/sqrt(shape)


def test_poisson_arrivals_are_drawn_as_before() -> None:
    import random

    from accelbench.scenarios.serve.measure import arrival_times

    rng = random.Random("3/2.5")
    before = list(itertools.accumulate(rng.expovariate(2.5) for _ in range(50)))
    assert arrival_times(2.5, 50, 1.0, "3/2.5") == before


@pytest.mark.parametrize(("start", "end", "burstiness"), [(5.0, 20.0, 1.0), (20.0, 5.0, 4.0)])
def test_a_ramp_goes_from_its_start_rate_to_its_end_rate(
    start: float, end: float, burstiness: float
) -> None:
    from accelbench.scenarios.serve.measure import arrival_times

    count = 40_000
    times = arrival_times(start, count, burstiness, "0/ramp", ramp_to=end)
    duration = 2 * count / (start + end)  # the mean rate is the ramp's midpoint
    assert len(times) / times[-1] == pytest.approx((start + end) / 2, rel=0.02)
    tenth = duration / 10
    first = sum(1 for t in times if t < tenth) / tenth
    last = sum(1 for t in times if duration - tenth <= t < duration) / tenth
    # Over the first and last tenth the rate is a twentieth of the way in from each end.
    assert first == pytest.approx(start + (end - start) / 20, rel=0.05)
    assert last == pytest.approx(end - (end - start) / 20, rel=0.05)
    assert times == sorted(times)


def test_a_flat_ramp_is_the_rate_itself() -> None:
    from accelbench.scenarios.serve.measure import arrival_times

    times = arrival_times(10.0, 20_000, 1.0, "0/flat", ramp_to=10.0)
    gaps = [b - a for a, b in itertools.pairwise([0.0, *times])]
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.05)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("timestamp_s,prompt_tokens,new_tokens\n10.5,12,4\n11,30,8\n", None),
        ("time,prompt_tokens,new_tokens\n0,12,4\n", "columns timestamp_s,prompt_tokens"),
        ("timestamp_s,prompt_tokens,new_tokens\n1,12,4\n0.5,30,8\n", "in order"),
        ("timestamp_s,prompt_tokens,new_tokens\n-1,12,4\n", "0 s or more"),
        ("timestamp_s,prompt_tokens,new_tokens\n0,12,0\n", "each 1 or more"),
        ("timestamp_s,prompt_tokens,new_tokens\n", "a row or more"),
    ],
)
def test_a_trace_is_read_from_its_start_or_refused_naming_the_fix(
    text: str, says: str | None, tmp_path: Path
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    if says is None:
        assert endpoint.read_trace(path) == [(0.0, 12, 4), (0.5, 30, 8)]
    else:
        with pytest.raises(Exception, match=says):
            endpoint.read_trace(path)


def test_the_shipped_trace_example_is_a_trace() -> None:
    trace = endpoint.read_trace(Path(__file__).parents[2] / "examples" / "serve-trace.csv")
    assert len(trace) == 24 and trace[0][0] == 0.0


def test_a_trace_is_replayed_at_its_times_with_its_lengths() -> None:
    """Each request is sent no earlier than its time in the trace, with its own lengths; the
    trial is filed under the trace's own rate and records the rate it realised."""
    from accelbench.scenarios.serve.measure import replay

    trace = [(0.0, 12, 4), (0.05, 30, 8), (0.06, 7, 2), (0.2, 50, 3)]
    sent: list[tuple[float, tuple[int, int] | None]] = []

    async def send(start: float, asked: tuple[int, int] | None = None) -> ServedRequest:
        sent.append((time.perf_counter() - start, asked))
        return _sent(sent[-1][0])

    t = asyncio.run(replay(served_spec(trace="t.csv"), send, trace))
    assert [asked for _, asked in sent] == [(p, n) for _, p, n in trace]
    assert all(at >= planned for (at, _), (planned, _, _) in zip(sent, trace, strict=True))
    assert t.rate_per_s == pytest.approx(3 / 0.2) and t.sent_per_s is not None
    assert len(t.requests) == 4


class _Counting(_Steady):
    """_Steady, keeping each request's max_tokens."""

    SERVICE_S = 0.02
    asked: ClassVar[list[int]] = []

    def keep(self, body: bytes) -> None:
        self.asked.append(json.loads(body)["max_tokens"])


def test_a_trace_and_a_ramp_run_through_the_cli(tmp_path: Path) -> None:
    db, trace = tmp_path / "r.sqlite", tmp_path / "trace.csv"
    trace.write_text("timestamp_s,prompt_tokens,new_tokens\n0,8,3\n0.1,9,5\n0.15,10,7\n0.4,11,9\n")
    with stub_server(_Counting) as url:
        base = [a for a in stub_cell(url) if a not in ("--rate-per-s", "50")]
        replayed = runner.invoke(app, [*base, "--trace", str(trace), "--db", str(db)])
        assert replayed.exit_code == 0, replayed.output
        assert sorted(_Counting.asked[-4:]) == [3, 5, 7, 9]  # the trace's lengths, each once
        ramped = [*base, "--rate-per-s", "20", "--ramp-to-per-s", "60", "--db", str(db)]
        done = runner.invoke(app, ramped)
        assert done.exit_code == 0, done.output
        both = runner.invoke(app, [*base, "--trace", str(trace), "--rate-per-s", "5"])
        assert both.exit_code == 2 and "--trace gives each request's time" in both.output
        alone = runner.invoke(app, [*base, "--ramp-to-per-s", "60"])
        assert alone.exit_code == 2 and "give --rate-per-s, where it starts" in alone.output
    with ResultStore(db) as store:
        by_trace = {r.spec.knob("trace") is not None: r for r in store.query()}
    for r in by_trace.values():
        s = record_of(r, ServeMetrics)
        assert r.status == "ok" and s is not None and s.reported == 1
        assert s.trials[1].sent_per_s is not None  # the rate it realised
    replay_search = record_of(by_trace[True], ServeMetrics)
    ramp_search = record_of(by_trace[False], ServeMetrics)
    assert replay_search and "the trace trace.csv, 4 requests over 0.4 s" in replay_search.search
    assert ramp_search and ramp_search.trials[1].rate_per_s == 40.0  # the ramp's mean rate
    assert "linear ramp from 20/s to 60/s" in ramp_search.search


def test_a_servers_energy_is_the_sum_of_its_counters_over_the_trial() -> None:

    readings = {"gpu0": iter([100.0, 160.0]), "gpu1": iter([7.0, 12.0]), "rapl": iter([18.0, 3.0])}
    meter = CounterMeter(
        "nvml-energy-counter",
        "GPU 0, 1 board(s) the server runs on",
        [
            (lambda: next(readings["gpu0"]), None),
            (lambda: next(readings["gpu1"]), None),
            (lambda: next(readings["rapl"]), 20.0),  # wrapped past 20 J: 18 -> 20 -> 3 is 5 J
        ],
    )
    meter.start()
    drawn = meter.stop()
    assert drawn.joules == pytest.approx(60.0 + 5.0 + 5.0) and drawn.method == "nvml-energy-counter"
    nothing = CounterMeter("not available", "the server is not on this host").stop()
    assert nothing.joules is None and nothing.scope == "the server is not on this host"


def test_energy_per_token_and_request_count_the_requests_that_succeeded() -> None:

    ok = [_sent(0.1 * i) for i in range(3)]  # 2 output tokens each
    failed = ServedRequest(sent_s=0.5, prompt_tokens=None, output_tokens=0, chunk_ms=[], error="x")
    t = serve.trial(served_spec(), [*ok, failed], 6.0, None, duration_s=1.0)
    assert t.joules_per_output_token is None and t.joules_per_request is None  # not metered
    metered = t.model_copy(update={"energy": EnergyMetrics(method="rapl", scope="s", joules=12.0)})
    assert metered.joules_per_output_token == pytest.approx(12.0 / 6)
    assert metered.joules_per_request == pytest.approx(12.0 / 3)
    line = serving.trial_text(metered)
    assert "2 J per output token, 4 J per request (rapl: s)" in line


def test_a_server_meter_reads_rapl_for_a_cpu_server_and_says_why_when_it_cannot(
    tmp_path: Path,
) -> None:

    away = server_meter([])
    assert away.method == "not available" and "not on this host" in away.scope
    unreadable = server_meter([os.getpid()], powercap=tmp_path)
    assert unreadable.method == "not available" and "needs read access" in unreadable.scope
    package = tmp_path / "intel-rapl:0"
    package.mkdir()
    (package / "energy_uj").write_text("5000000\n")
    (package / "max_energy_range_uj").write_text("262143328850\n")
    rapl = server_meter([os.getpid()], powercap=tmp_path)
    assert rapl.method == "rapl" and "the server's and all else's" in rapl.scope
    rapl.start()
    (package / "energy_uj").write_text("9000000\n")
    assert rapl.stop().joules == pytest.approx(4.0)


def served_once(db: Path, *args: str) -> tuple[Result, str]:
    """A serve cell against a steady stub (stub_cell and `args`), stored in `db`: its result
    and the command's output."""
    with stub_server(_Steady) as url:
        done = runner.invoke(app, [*stub_cell(url), *args, "--db", str(db)])
        assert done.exit_code == 0, done.output
    with ResultStore(db) as store:
        (r,) = store.query()
    return r, done.output


def _first_rate_energy(db: Path, *args: str) -> tuple[EnergyMetrics | None, str]:
    """served_once's energy over its first arrival trial, and the output."""
    r, output = served_once(db, *args)
    s = record_of(r, ServeMetrics)
    assert s is not None
    return s.trials[1].energy, output


def test_a_stub_server_on_this_host_gets_an_energy_reading_or_the_reason_it_has_none(
    tmp_path: Path,
) -> None:
    drawn, output = _first_rate_energy(tmp_path / "r.sqlite")
    assert drawn is not None  # the stub listens in this process: a server on this host
    if drawn.joules is None:
        assert drawn.method == "not available" and "energy not measured" in output
    else:
        assert drawn.method in ("rapl", "nvml-energy-counter") and "J per output token" in output


def test_a_logged_power_series_gives_a_remote_servers_energy(tmp_path: Path) -> None:
    """--power-series: a constant 150 W logged by time_s,watts around the run, so each trial's
    energy is 150 W over its window, whatever the window's length."""
    series = tmp_path / "power.csv"
    now = time.time()
    rows = [f"{now + t:.3f},150" for t in range(-60, 600, 5)]
    series.write_text("time_s,watts\n" + "\n".join(rows) + "\n")
    db = tmp_path / "r.sqlite"
    drawn, output = _first_rate_energy(db, "--power-series", str(series))
    assert drawn is not None and drawn.method == "power series"
    assert drawn.avg_power_w == pytest.approx(150.0) and "J per output token" in output
    bad = tmp_path / "bad.csv"
    bad.write_text("when,power\n1,2\n")
    with stub_server(_Steady) as url:
        refused = runner.invoke(app, [*stub_cell(url), "--power-series", str(bad), "--db", str(db)])
    assert refused.exit_code == 2 and "columns time_s,watts" in refused.output


def test_the_gpus_a_local_server_runs_on_are_counted_and_metered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    # A server in this process: the NVML below sees it on GPUs 0 and 2 of 3.
    joules = itertools.count(1000, 50)  # mJ, growing at each read
    fake = SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 3,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetComputeRunningProcesses=lambda h: (
            [SimpleNamespace(pid=os.getpid())] if h != 1 else []
        ),
        nvmlDeviceGetTotalEnergyConsumption=lambda h: next(joules),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    meter = server_meter([os.getpid()])
    assert (meter.method, meter.boards) == ("nvml-energy-counter", 2)
    assert "GPU 0, 2 board(s)" in meter.scope
    with stub_server(_Steady) as url:
        spec = served_spec(
            endpoint=url, workload="served/m", epochs=2, steps_per_epoch=2, num_queries=4
        ).model_copy(update={"rate_per_s": 50.0})
        found = serve.measure(spec).of(ServeMetrics)
    assert found is not None and found.server_devices == 2
    assert found.trials[1].energy is not None and found.trials[1].energy.joules


def test_the_client_keeps_one_connection_per_request_in_flight() -> None:
    """Every request reads its stream to the end, so its connection serves the next: a closed
    loop of three clients and an arrival trial open no more connections than requests were in
    flight at once (three, unless a loaded host let the arrivals pile up), not one a request
    (each of which would add a handshake to its TTFT), though the stub ends each stream a
    moment after its [DONE]."""
    script = Path(__file__).parents[2] / "benchmarks" / "serve_client.py"
    stub = subprocess.Popen(
        [sys.executable, str(script), "--stub", "--new-tokens", "4", "--end-after-ms", "20"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stub.stdout is not None
        url = f"http://127.0.0.1:{stub.stdout.readline().strip()}"
        spec = served_spec(
            endpoint=url,
            batch_size=3,
            epochs=2,
            steps_per_epoch=5,
            new_tokens=4,
            rate_per_s=50.0,
            num_queries=6,
        )
        metrics = serve.measure(spec)
        connections = json.loads(httpx.get(f"{url}/connections", timeout=10).text)["connections"]
    finally:
        stub.terminate()
        stub.wait(10)
    record = metrics.of(ServeMetrics)
    assert record is not None and len(record.trials) == 2
    sent = sum(len(t.requests) for t in record.trials)
    assert sent >= 3 * 5 + 6 and all(r.error is None for t in record.trials for r in t.requests)
    # A request holds its connection from its sending to its stream's end, 20 ms after its last
    # chunk; 0.1 s more for the client's own turn back to the pool on a loaded host.
    arrivals = record.trials[-1]
    assert arrivals.rate_per_s == 50.0
    held = [(r.sent_s, r.sent_s + r.chunk_ms[-1] / 1e3 + 0.12) for r in arrivals.requests]
    at_once = max(sum(start <= t < end for start, end in held) for t, _ in held)
    assert 3 <= connections <= max(3, at_once), (connections, at_once)


class _Closing(_Steady):
    """Answers at once, and closes each connection a moment after its [DONE]."""

    SERVICE_S = 0.0


class _Kept(_Steady):
    """Answers at once, and keeps each connection for the next request (Content-Length)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        chunks = [{"model": "m", "choices": [{"text": text}]} for text in ("a", "b")]
        events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(events)))
        self.end_headers()
        self.wfile.write(events.encode())


@pytest.mark.parametrize("handler", [_Kept, _Closing])
def test_a_request_schedules_no_task_of_its_own(handler: type[_Steady]) -> None:
    """Each answer's stream is closed as its request is left, not by the event loop's finalizer
    of unfinished generators, which schedules a task for it (benchmarks/serve_client.py pairs
    the client with a bare one), and the rest of a stream after its [DONE] is read within a
    timeout, not in a task of wait_for's. What is left is aiohttp's
    own, at most one a request (it writes the request's body in a task)."""

    async def ask(url: str) -> tuple[list[endpoint.Reply], int]:
        made = itertools.count()

        def counted(loop: asyncio.AbstractEventLoop, coro: object, **kw: object) -> asyncio.Task:
            next(made)
            return asyncio.Task(coro, loop=loop, **kw)  # type: ignore[arg-type]

        asyncio.get_running_loop().set_task_factory(counted)
        async with endpoint.session() as client:
            replies = [await endpoint.complete(client, url, "m", "hi", 4, 10.0) for _ in range(8)]
            for _ in range(3):  # a finalizer's task is made at the loop's next turn
                await asyncio.sleep(0)
            return replies, next(made)  # before the session's closing, which makes its own

    with stub_server(handler) as url:
        replies, tasks = asyncio.run(ask(url))
    assert all(r.finished and len(r.chunks) == 2 for r in replies), replies
    assert tasks <= len(replies)


def test_the_client_is_measured_on_the_host_not_on_a_torch_device() -> None:
    # A client scenario drives no device: its epochs, energy and host readings take the host
    # (engines.HOST), and its measure names no framework.
    tree = ast.parse(Path(serve.__file__).read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "accelbench.engines" in modules
    assert not [m for m in modules if m.split(".")[0] in ("torch", "jax", "tensorflow")]
    timer = HOST.timer()
    for _ in range(3):
        timer.mark()
    assert len(timer.intervals_ms()) == 2 and timer.intervals_ms() == []
    assert (HOST.type, HOST.index, HOST.peak_memory_gib()) == ("cpu", None, (None, None))
    # Nor does anything a client cell imports: it starts afresh (launch._start), and torch took
    # 3 s of CPU and 600 MB of its peak memory here.
    cell = "from accelbench.cell import child, runner; from accelbench import scenarios"
    cell += "; scenarios.get('serve').measure_fn(); import sys; print(sorted(sys.modules))"
    imported = subprocess.run([sys.executable, "-c", cell], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    assert "'torch'" not in imported.stdout and "'accelbench.scenarios.epochs'" in imported.stdout
