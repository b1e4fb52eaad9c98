"""A JSON text read a piece at a time, a value at a time: what lets an export document of many
results be imported holding one (storage.exchange)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

import orjson

PIECE_CHARS = 1 << 20
"""What is read at a time."""
SPACE = " \t\n\r"
"""JSON's white space."""


class Reader:
    """A JSON text read a piece at a time: its punctuation, and its values one by one (objects
    made by `pairs`), so that a long list is never held whole. A value may span pieces; one
    longer than `most` characters is refused (ValueError)."""

    def __init__(
        self, text: TextIO, pairs: Callable[[list[tuple[str, Any]]], Any], most: int
    ) -> None:
        self.text, self.buf, self.pos, self.most = text, "", 0, most
        self.decoder = json.JSONDecoder(object_pairs_hook=pairs)

    def _more(self) -> bool:
        """Read on, at least as much again as is held (a long value then costs linear time);
        False at the end, the buffer unchanged."""
        if len(self.buf) - self.pos > self.most:
            raise ValueError(f"a value of over {self.most >> 20} MiB")
        piece = self.text.read(max(PIECE_CHARS, len(self.buf) - self.pos))
        if not piece:
            return False
        self.buf, self.pos = self.buf[self.pos :] + piece, 0
        return True

    def peek(self) -> str:
        """The next character that is not white space; "" at the end."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in SPACE:
                self.pos += 1
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos : self.pos + 1]

    def take(self, allowed: str) -> str:
        """The next character, which must be one of `allowed`."""
        found = self.peek()
        if not found or found not in allowed:
            raise json.JSONDecodeError(f"expected one of {allowed!r}", self.buf, self.pos)
        self.pos += 1
        return found

    def value(self) -> Any:
        """The next JSON value, read on until it is whole."""
        self.peek()
        if (line := self._line()) is not None:
            found, self.pos = line
            return found
        while True:
            try:
                found, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self._more():  # cut off where the piece ends, or malformed: read on
                    continue
                raise
            if end == len(self.buf) and self._more():  # a number may go on in the next piece
                continue
            self.pos = end
            return found

    def _line(self) -> tuple[Any, int] | None:
        """The value that the rest of this line holds (less a comma after it) where exact()
        reads it (an export writes each result on a line of its own), and where it ends; None
        where it does not (json then reads it, as `pairs` has it) or no whole line is held."""
        end = self.buf.find("\n", self.pos)
        if end < 0 or end - self.pos > self.most:
            return None
        text = self.buf[self.pos : end].removesuffix(",")
        found = exact(text.encode())
        return None if found is NOT_EXACT else (found, self.pos + len(text))


NOT_EXACT = object()
"""exact()'s answer for a text it does not read."""


def exact(text: bytes) -> Any:
    """The JSON value of `text` as orjson reads it, in a quarter of json's time, where orjson
    writes the value back as `text` itself, which proves that no object in it gives a key twice
    (orjson writes each once, and keeps the last of a repeated one); NOT_EXACT for any other
    text (another spacing, NaN, an integer past 64 bits, a repeated key: for json to read)."""
    try:
        found = orjson.loads(text)
        return found if orjson.dumps(found) == text else NOT_EXACT
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return NOT_EXACT
