"""What comes over the wire from a server accelbench does not control (an OpenAI-compatible
server, a Prometheus server): read within a line cap, a body cap and a deadline, decompressed
in bounded pieces where a server compressed it unasked, so that one hostile or broken answer
costs the request it came in and a bounded amount of memory and time."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any


class Garbage(Exception):
    """An answer that breaks its protocol or its bounds; the message says how."""


LINE_CAP_BYTES = 1 << 20
"""The longest line of an event stream read: a completion chunk is a few hundred bytes."""
BODY_CAP_BYTES = 32 << 20
"""The most an answer's body may hold once decompressed: a whole 4,096-token stream is about
1 MB, so this bounds each request's memory, not what a server may say."""
_PIECE_BYTES = 1 << 16
"""Decompression works in pieces this large, yielding to the event loop between them, so that
a request's deadline holds during it."""


async def lines(body: AsyncIterator[bytes], encoding: str) -> AsyncGenerator[str, None]:
    """The lines of a body's raw bytes as they arrive, decompressed in bounded pieces where the
    server compressed it (`encoding`, its Content-Encoding); raises Garbage for a line over
    LINE_CAP_BYTES or a body over BODY_CAP_BYTES."""
    pieces, inflated = decoder(encoding), encoding.strip().lower() not in ("", "identity")
    buffer, total = b"", 0
    async for raw in body:
        for piece in pieces(raw):
            total += len(piece)
            if total > BODY_CAP_BYTES:
                raise Garbage(f"an answer over {BODY_CAP_BYTES >> 20} MiB")
            *whole, buffer = (buffer + piece).split(b"\n")
            if len(buffer) > LINE_CAP_BYTES:
                raise Garbage(f"a line over {LINE_CAP_BYTES >> 20} MiB")
            for line in whole:
                yield line.decode(errors="replace").rstrip("\r")
            if inflated:  # the deadline can stop a long decompression between pieces
                await asyncio.sleep(0)
    if buffer:
        yield buffer.decode(errors="replace")


def decoder(encoding: str) -> Callable[[bytes], Iterator[bytes]]:
    """What turns the body's raw bytes into its content, a bounded piece at a time."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return lambda raw: iter((raw,))
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise Garbage(f"an answer in {encoding!r} encoding, though none was asked for")
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib, by the header

    def pieces(raw: bytes) -> Iterator[bytes]:
        try:
            yield inflate.decompress(raw, _PIECE_BYTES)
            while inflate.unconsumed_tail:
                yield inflate.decompress(inflate.unconsumed_tail, _PIECE_BYTES)
        except zlib.error as exc:
            raise Garbage(f"a compressed answer that does not inflate ({exc})") from None

    return pieces


async def drain(lines: AsyncIterator[str]) -> None:
    async for _ in lines:
        pass


def get(url: str, params: dict[str, Any], deadline_s: float, cap_bytes: int) -> bytes:
    """A GET's whole body within `deadline_s` (each read waits 5 s at most, so a server that
    trickles overruns it by that at most) and `cap_bytes` decompressed; raises Garbage for
    either, or an answer but 200, and httpx.HTTPError for the transport's faults."""
    import httpx

    end = time.monotonic() + deadline_s
    body = bytearray()
    timeout = httpx.Timeout(min(deadline_s, 5.0))
    headers = {"Accept-Encoding": "identity"}
    with httpx.stream("GET", url, params=params, headers=headers, timeout=timeout) as response:
        if response.status_code != 200:
            raise Garbage(f"HTTP {response.status_code}")
        pieces = decoder(response.headers.get("content-encoding", "identity"))
        for raw in response.iter_raw():
            for piece in pieces(raw):
                body += piece
                if len(body) > cap_bytes:
                    raise Garbage(f"an answer over {cap_bytes >> 20} MiB")
            if time.monotonic() > end:
                raise Garbage(f"no whole answer within {deadline_s:g} s")
    return bytes(body)
