"""Raw samples (a request's chunk times, a call's token times) kept compactly: a list of floats
in memory, and in JSON a string of their float32 values, little-endian, in base64 after "f4:",
about 5.3 characters a sample where a JSON number took about 18. Samples are rounded to float32
as they are made (under a microsecond in 10 s), before any summary is taken from them, so a
record's summaries agree with its samples and it reads back exactly as it was written. Lists of
numbers, as older records hold them, are read too."""

from __future__ import annotations

import base64
import binascii
import sys
from array import array
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

PREFIX = "f4:"


def _packed(values: list[float]) -> array[float]:
    packed = array("f", values)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed


def _read(value: Any) -> Any:
    """A list of floats from a packed string or a list (rounded to float32 either way)."""
    if isinstance(value, str):
        if not value.startswith(PREFIX):
            raise ValueError(f"packed samples start with {PREFIX!r}")
        try:
            raw = base64.b64decode(value.removeprefix(PREFIX), validate=True)
        except binascii.Error:
            raise ValueError("packed samples are not base64") from None
        if len(raw) % 4:
            raise ValueError("packed samples are not whole float32 values")
        unpacked = array("f")
        unpacked.frombytes(raw)
        if sys.byteorder == "big":  # stored little-endian
            unpacked.byteswap()
        return unpacked.tolist()
    if isinstance(value, list) and all(isinstance(v, int | float) for v in value):
        return array("f", value).tolist()
    return value  # not samples: the list[float] check says why


def _write(values: list[float]) -> str:
    return PREFIX + base64.b64encode(_packed(values).tobytes()).decode()


Samples = Annotated[
    list[float], BeforeValidator(_read), PlainSerializer(_write, return_type=str, when_used="json")
]
"""Raw samples: a list of floats, written packed in JSON."""
