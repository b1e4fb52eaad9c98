"""A hostile or broken OpenAI-compatible server: every answer it can give costs the request it
came in, with a reason, never the cell, a traceback, a hang or unbounded memory."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import sqlite3
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import wire
from accelbench.cli import app
from accelbench.scenarios.serve import endpoint
from tests.scenarios.test_serve import stub_cell, stub_server


def _chunk(**fields: object) -> bytes:
    return b"data: " + json.dumps({"model": "m", **fields}).encode() + b"\n\n"


GOOD = _chunk(choices=[{"text": " word"}]) + _chunk(
    choices=[], usage={"prompt_tokens": 3, "completion_tokens": 1}
)
BOMB = gzip.compress(b"data: " + b" " * (200 << 20), compresslevel=9)  # 200 MiB from ~200 kB
MODES: dict[str, bytes] = {
    "choices a number": _chunk(choices=5),
    "choices an object": _chunk(choices={"0": {"text": "x"}}),
    "a choice a number": _chunk(choices=[1]),
    "delta a string": _chunk(choices=[{"delta": "x"}]),
    "text a number": _chunk(choices=[{"text": 7}]),
    "content a list": _chunk(choices=[{"delta": {"content": ["x"]}}]),
    "model a number": _chunk(model=7, choices=[{"text": "x"}]),
    "usage a string": _chunk(choices=[{"text": "x"}], usage="lots"),
    "usage a list": _chunk(choices=[{"text": "x"}], usage=[1, 2]),
    "usage NaN": b'data: {"choices": [{"text": "x"}], "usage": NaN}\n\n',
    "count NaN": b'data: {"choices": [{"text": "x"}], "usage": {"completion_tokens": NaN}}\n\n',
    "count 1e308": _chunk(choices=[{"text": "x"}], usage={"completion_tokens": 1e308}),
    "count negative": _chunk(choices=[{"text": "x"}], usage={"completion_tokens": -5}),
    "count absurd": _chunk(choices=[{"text": "x"}], usage={"completion_tokens": 10**30}),
    "count true": _chunk(choices=[{"text": "x"}], usage={"completion_tokens": True}),
    "prompt absurd": _chunk(choices=[{"text": "x"}], usage={"prompt_tokens": 10**9}),
    "more chunks than tokens": _chunk(choices=[{"text": "x"}]) * 100,
    "nested deep": b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n",
    "not JSON": b"data: {oops\n\n",
    "an endless line": b"data: " + b"x" * (3 << 20),
}
"""Answers inside the cell, each a 200 stream that breaks the protocol or its bounds."""


class _Hostile(BaseHTTPRequestHandler):
    """Answers the first request (accelbench's check) well, then as `mode` says; with `every`
    2, every other request only."""

    mode = "choices a number"
    seen = 0
    every = 1

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).seen += 1
        hostile = self.seen > 1 and self.seen % self.every == 0
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client hung up
            self._answer(self.mode if hostile else "good")

    def _answer(self, mode: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        if mode == "gzip bomb":
            self.send_header("content-encoding", "gzip")
        if mode == "brotli":
            self.send_header("content-encoding", "br")
        self.end_headers()
        if mode == "trickle":  # a byte at a time, forever (until the client hangs up)
            for _ in range(600):
                self.wfile.write(b":")
                self.wfile.flush()
                time.sleep(0.1)
            return
        body = {"good": GOOD, "gzip bomb": BOMB, "brotli": GOOD}.get(mode) or MODES[mode]
        talk_on = b":" * 10 if mode == "good" else b""  # bytes after [DONE] are no fault
        self.wfile.write(body + b"data: [DONE]\n\n" + talk_on)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("Hostile", (_Hostile,), {"seen": 0})
    with stub_server(handler) as url:
        yield url, handler


def _ask(url: str, timeout_s: float = 20.0) -> endpoint.Reply:
    async def ask() -> endpoint.Reply:
        async with endpoint.session() as client:
            return await endpoint.complete(client, url, "m", "hello there", 4, timeout_s)

    return asyncio.run(ask())


@pytest.mark.parametrize("mode", [*MODES, "gzip bomb", "brotli"])
def test_each_hostile_answer_is_that_requests_garbage_with_a_reason(
    hostile: tuple[str, type[_Hostile]], mode: str
) -> None:
    url, handler = hostile
    handler.mode, handler.seen = mode, 1  # past the check: every answer is the hostile one
    reply = _ask(url)
    assert reply.failure == "garbage" and reply.error, (mode, reply)
    assert len(reply.error) < 200 and "\n" not in reply.error


def test_a_good_answer_is_read_whole_and_talk_after_done_is_no_fault(
    hostile: tuple[str, type[_Hostile]],
) -> None:
    url, _ = hostile
    reply = _ask(url)
    assert reply.failure is None and reply.finished
    assert (reply.prompt_tokens, reply.output_tokens, len(reply.chunks)) == (3, 1, 1)


def test_a_trickling_answer_ends_at_the_requests_deadline(
    hostile: tuple[str, type[_Hostile]],
) -> None:
    url, handler = hostile
    handler.mode, handler.seen = "trickle", 1
    start = time.perf_counter()
    reply = _ask(url, timeout_s=0.5)
    # the stub trickles for a minute: only the deadline ends the request this soon
    assert reply.failure == "timeout" and time.perf_counter() - start < 30.0


def test_a_bomb_inflates_a_bounded_piece_at_a_time() -> None:
    # Bounded pieces: the request's deadline and the body cap can stop it between any two.
    pieces, seen = wire.decoder("gzip")(BOMB), 0
    while seen < 8 << 20:
        piece = next(pieces)
        assert 0 < len(piece) <= 1 << 16
        seen += len(piece)
    with pytest.raises(wire.Garbage, match="none was asked for"):
        wire.decoder("br")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["count absurd", "choices a number"])
def test_one_bad_answer_costs_its_request_never_the_cell(
    hostile: tuple[str, type[_Hostile]], mode: str, tmp_path: Path
) -> None:
    url, handler = hostile
    handler.mode, handler.every = mode, 2
    db = tmp_path / "r.sqlite"
    out = CliRunner().invoke(app, [*stub_cell(url), "--db", str(db)])
    # every other request after the check is hostile: the cell is measured, those requests
    # failed each with its reason
    assert "Traceback" not in out.output, out.output
    with sqlite3.connect(db) as con:
        ((status, record),) = con.execute("SELECT status, record FROM results").fetchall()
    assert status == "ok", record[:500]
    trials = json.loads(record)["metrics"]["record"]["trials"]
    errors = [r["error"] for t in trials for r in t["requests"]]
    assert any(errors) and not all(errors)
    rates = [t.get("output_tokens_per_s") for t in trials]
    assert all(r is None or r >= 0 for r in rates)  # no negative or absurd rate stored
