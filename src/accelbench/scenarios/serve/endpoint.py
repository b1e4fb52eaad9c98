"""An OpenAI-compatible server as the serve scenario talks to it: one streamed completion,
timed as its chunks arrive, and a check that the server answers before any cell runs.

Requests go to {endpoint}/v1/completions, which vLLM, SGLang, TGI, llama.cpp's server and
`transformers serve` all answer: a text prompt, max_tokens, greedy decoding (temperature 0),
streamed as server-sent events, with stream_options asking for the usage counts in the last
chunk (servers that do not know it ignore it). Only fields of OpenAI's own API are sent, as some
servers refuse any other (transformers serve answers 422): a server that stops at its
end-of-sequence token cannot be told not to, so each request's record keeps the tokens it got.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import math
import os
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from accelbench import inputs, wire
from accelbench.errors import AccelbenchError, one_line
from accelbench.secrets import remember, scrub
from accelbench.wire import Garbage

if TYPE_CHECKING:
    import aiohttp

Failure = Literal["connect", "http", "timeout", "garbage", "server"]
CHECK_TIMEOUT_S = 60.0
"""How long the check before the first cell waits for a two-token answer: a server that loads
its model at the first request takes this long at most on a small model."""
_WORDS = [
    "time",
    "person",
    "year",
    "way",
    "day",
    "thing",
    "man",
    "world",
    "life",
    "hand",
    "part",
    "child",
    "eye",
    "woman",
    "place",
    "work",
    "week",
    "case",
    "point",
    "number",
    "group",
    "problem",
    "fact",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "community",
    "name",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "information",
]
"""Common English words: nearly every tokenizer makes one token of each with its space."""


@dataclass
class Reply:
    """What a streamed completion gave, with host times (time.perf_counter) of its text chunks."""

    sent: float
    chunks: list[float] = field(default_factory=list)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """The server's usage counts; None where it gave none."""
    model: str | None = None
    """The model as the server's chunks name it."""
    failure: Failure | None = None
    error: str | None = None
    finished: bool = False
    """The stream reached its [DONE]."""


def read_lengths(path: Path) -> list[tuple[int, int]]:
    """(prompt_tokens, new_tokens) of each row of a lengths CSV; raises, naming the fix, on a
    file that is not one."""
    fix = f"lengths file {path}: give a CSV with columns prompt_tokens,new_tokens"
    rows = _csv_rows(path, "lengths file", fix)
    try:
        pairs = [(int(r["prompt_tokens"]), int(r["new_tokens"])) for r in rows]
    except (KeyError, TypeError, ValueError):
        raise AccelbenchError(f"{fix} of whole numbers") from None
    if not pairs or any(p < 1 or n < 1 for p, n in pairs):
        raise AccelbenchError(f"{fix}, a row or more, each 1 or more")
    return pairs


def _csv_rows(path: Path, what: str, fix: str) -> list[dict[str, str]]:
    """The rows of a CSV file by its header; raises with `fix` on one that cannot be read."""
    try:
        with inputs.opened(path, what, inputs.TABLE_BYTES) as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AccelbenchError(f"{fix} ({type(exc).__name__})") from None


TRACE_COLUMNS = ("timestamp_s", "prompt_tokens", "new_tokens")


def read_trace(path: Path) -> list[tuple[float, int, int]]:
    """(seconds from the trace's start, prompt_tokens, new_tokens) of each row of a trace CSV,
    in time order; raises, naming the fix, on a file that is not one."""
    fix = f"trace {path}: give a CSV with columns {','.join(TRACE_COLUMNS)}"
    rows = _csv_rows(path, "trace", fix)
    try:
        found = [
            (float(r["timestamp_s"]), int(r["prompt_tokens"]), int(r["new_tokens"])) for r in rows
        ]
    except (KeyError, TypeError, ValueError):
        raise AccelbenchError(f"{fix}: seconds, then whole numbers") from None
    times = [t for t, _, _ in found]
    if not found or any(p < 1 or n < 1 for _, p, n in found):
        raise AccelbenchError(f"{fix}, a row or more, lengths each 1 or more")
    if any(not math.isfinite(t) or t < 0 for t in times) or times != sorted(times):
        raise AccelbenchError(f"{fix}: times of 0 s or more, in order")
    start = times[0]
    return [(t - start, p, n) for t, p, n in found]


def prompt(rng: random.Random, num_words: int) -> str:
    """A prompt of `num_words` random words, about as many tokens; each request's differs, so
    no server answers it from a prefix cache."""
    return " ".join(rng.choices(_WORDS, k=num_words))


def session(headers: dict[str, str] | None = None) -> aiohttp.ClientSession:
    """The client the requests go through: aiohttp, as vllm bench and GuideLLM's peers use
    (httpx cost 3 ms of client CPU a request, a fast server's whole answer); each request in
    flight has a connection of its own, kept for the next (no limit: the closed loop and the
    arrivals decide how many are open); answers are read as they came, compressed or not
    (wire.decoder inflates a bounded piece at a time); no timeout of its own but the connect's:
    complete() bounds each request."""
    import aiohttp

    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        headers=headers,
        auto_decompress=False,
    )


async def complete(
    client: aiohttp.ClientSession,
    endpoint: str,
    model: str,
    text: str,
    max_tokens: int,
    timeout_s: float,
    chat: bool = False,
) -> Reply:
    """Send one streamed completion (`chat`: a chat completion of one user message) and time its
    chunks; never raises for the server's faults, and never waits past `timeout_s` from sending
    to the last chunk. Whatever one answer holds (wrong types, absurd counts, endless lines, a
    compression bomb), it is this request's failure with a reason, never the cell's."""
    import aiohttp

    reply = Reply(sent=time.perf_counter())
    asked: dict[str, Any] = (
        {"messages": [{"role": "user", "content": text}]} if chat else {"prompt": text}
    )
    body = {
        "model": model,
        **asked,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    path = "/v1/chat/completions" if chat else "/v1/completions"
    bounds = _Bounds(max_tokens + TOKEN_MARGIN, len(text.encode()) + PROMPT_OVERHEAD)
    try:
        async with asyncio.timeout(timeout_s):  # no task of its own, as wait_for would make
            await _stream(client, f"{endpoint}{path}", body, reply, bounds)
    except TimeoutError:
        if not reply.finished:  # a server that talks on after [DONE] has still answered
            reply.failure, reply.error = "timeout", f"no whole answer within {timeout_s:g} s"
    except aiohttp.ClientError as exc:  # refused, reset, or a broken stream
        reply.failure, reply.error = "connect", one_line(exc) or type(exc).__name__
    except Garbage as exc:
        reply.failure, reply.error = "garbage", str(exc)
    except Exception as exc:  # anything else one answer provokes is that request's failure
        reply.failure, reply.error = "garbage", f"an unreadable answer ({one_line(exc)})"
    reply.error = reply.error and scrub(reply.error)  # a server may echo the key it refused
    return reply


TOKEN_MARGIN = 16
"""Output tokens a server may count beyond max_tokens (an end-of-sequence token, a template's)
before its count is taken as garbage."""
PROMPT_OVERHEAD = 4096
"""Prompt tokens beyond one per byte of the prompt (a chat template's) that a count may hold."""


@dataclass(frozen=True)
class _Bounds:
    output_tokens: int
    prompt_tokens: int


async def _stream(
    client: aiohttp.ClientSession, url: str, body: dict[str, Any], reply: Reply, bounds: _Bounds
) -> None:
    # identity: a compressed answer is one the server was not asked for, read within bounds
    headers = {"Accept-Encoding": "identity"}
    async with client.post(url, json=body, headers=headers) as response:
        encoding = response.headers.get("Content-Encoding", "identity")
        # Closed here when left, not by the event loop's finalizer of unfinished generators,
        # which wakes the loop and schedules a task for it: one more of each a request.
        async with contextlib.aclosing(wire.lines(response.content.iter_any(), encoding)) as lines:
            if response.status != 200:
                text = await anext(lines, "")
                reply.failure, reply.error = "http", f"HTTP {response.status}: {_gist(text)}"
                return
            await _events(lines, reply, bounds)
            # Read to the end, briefly (a server ends its stream with [DONE]), so that the
            # connection is kept for the next request; one that holds it open costs the request
            # 0.2 s at most.
            if not response.content.at_eof():
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(0.2):  # no task of its own, as wait_for makes
                        await wire.drain(lines)


async def _events(lines: AsyncIterator[str], reply: Reply, bounds: _Bounds) -> None:
    """An answer's event stream into `reply`, up to its [DONE] or the server's error."""
    async for line in lines:
        if not line.strip() or line.startswith(":"):  # SSE's blank lines and comments
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            reply.finished = True
            return
        chunk = _json(data) if line.startswith("data:") else None
        if not isinstance(chunk, dict):
            raise Garbage(f"not an event stream of JSON chunks: {_gist(line)}")
        if "error" in chunk:
            reply.failure, reply.error = "server", f"the server: {_gist(str(chunk['error']))}"
            return
        _read_chunk(chunk, reply, bounds)


def _read_chunk(chunk: dict[str, Any], reply: Reply, bounds: _Bounds) -> None:
    """Take one completion chunk's text, model and usage counts into `reply`; raise Garbage
    for any field of the wrong type or out of bounds."""
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise Garbage(f"choices is not a list of objects: {_gist(str(choices))}")
    choice = choices[0] if choices else {}
    delta = choice.get("delta") or {}
    if not isinstance(delta, dict):
        raise Garbage(f"delta is not an object: {_gist(str(delta))}")
    for name, value in (("text", choice.get("text")), ("content", delta.get("content"))):
        if value is not None and not isinstance(value, str):
            raise Garbage(f"{name} is not text: {_gist(repr(value))[:40]}")
    if choice.get("text") or delta.get("content"):  # a completion's text, or a chat's delta
        if len(reply.chunks) >= bounds.output_tokens:
            raise Garbage(f"more text chunks than the {bounds.output_tokens} tokens asked for")
        reply.chunks.append(time.perf_counter())
    model = chunk.get("model")
    if model is not None and not isinstance(model, str):
        raise Garbage(f"model is not a name: {_gist(repr(model))[:40]}")
    reply.model = model[:200] if model else reply.model
    usage = chunk.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise Garbage(f"usage is not an object: {_gist(str(usage))}")
    if usage:
        reply.prompt_tokens = _count(usage, "prompt_tokens", bounds.prompt_tokens)
        reply.output_tokens = _count(usage, "completion_tokens", bounds.output_tokens)


def _count(usage: dict[str, Any], name: str, most: int) -> int | None:
    value = usage.get(name)
    if value is not None and (type(value) is not int or not 0 <= value <= most):
        raise Garbage(f"usage.{name} {_gist(repr(value))[:40]} is not a count of 0 to {most}")
    return value


def _json(text: str) -> Any:
    """A chunk's JSON, read by orjson (a client's CPU bounds what it can drive: with it and one
    call for a prompt's words, 0.9x the CPU a request); by json where orjson refuses it (NaN,
    Infinity); None where neither reads it."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _gist(text: str) -> str:
    return " ".join(text.split())[:160] or "(empty)"


def headers(api_key_env: str | None) -> dict[str, str]:
    """The requests' headers: the API key from the environment variable `api_key_env` as a
    bearer token (vLLM's --api-key, hosted endpoints), never stored nor printed."""
    if api_key_env is None:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise AccelbenchError(
            f"${api_key_env} is not set: export the server's API key in it (--api-key-env names "
            "the variable, so the key itself is never on the command line nor stored)"
        )
    remember(key)  # scrubbed from any message that might echo it
    return {"Authorization": f"Bearer {key}"}


def check(
    endpoint: str,
    model: str,
    timeout_s: float = CHECK_TIMEOUT_S,
    api_key_env: str | None = None,
    chat: bool = False,
) -> None:
    """Ask the server for two tokens of `model`; raise an AccelbenchError naming the fix if it
    does not answer as an OpenAI-compatible server serving that model."""
    sent = headers(api_key_env)

    async def ask() -> Reply:
        async with session(sent) as client:
            return await complete(client, endpoint, model, "Hello", 2, timeout_s, chat)

    reply = asyncio.run(ask())
    models = f"name a model it serves as served/NAME ({endpoint}/v1/models lists them)"
    if reply.failure == "connect":
        raise AccelbenchError(
            f"no server answers at {endpoint} ({reply.error}): start it, or give --endpoint the "
            "address it listens on"
        )
    if reply.failure == "timeout":
        raise AccelbenchError(
            f"{endpoint} gave no whole two-token answer within {timeout_s:g} s: check that the "
            "server has loaded its model and is not busy"
        )
    if reply.failure == "http" and (reply.error or "").startswith(("HTTP 401", "HTTP 403")):
        raise AccelbenchError(
            f"{endpoint} refused the request ({reply.error}): give --api-key-env NAME, the "
            "environment variable that holds its API key"
        )
    if reply.failure == "http" and (reply.error or "").startswith("HTTP 404"):
        raise AccelbenchError(
            f"{endpoint} has no {'/v1/chat/completions' if chat else '/v1/completions'} "
            f"({reply.error}): give --endpoint the base URL of an OpenAI-compatible server"
        )
    if reply.failure in ("http", "server"):
        raise AccelbenchError(f"{endpoint} refused model {model!r} ({reply.error}): {models}")
    if reply.failure == "garbage" or not reply.chunks:
        why = reply.error or "a stream without text"
        raise AccelbenchError(
            f"{endpoint} does not answer as an OpenAI-compatible server ({why}): check --endpoint"
        )
