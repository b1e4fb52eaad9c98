"""The base of every model that crosses a boundary (files, processes, the database), and what
is worked out of one once."""

from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationInfo, ValidatorFunctionWrapHandler

M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")

SHARED = "shared"
"""The validation context's key of the table shared() keeps (sharing())."""
SHARED_MOST = 4096
"""The most specs and environments that table holds (the least recently read go first): a
site's nightly sweep of a few thousand cells on every host, in about 25 MB."""


class Frozen(BaseModel):
    """Immutable, unknown fields rejected, attribute docstrings as field descriptions."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="strings"
    )


def kept(make: Callable[[M], V]) -> Callable[[M], V]:
    """make(model), worked out once a model for as long as it lives: a frozen model's value
    does not change, and the records an import validates share their specs and environments
    (shared()), so that what is made of one is made once. The value is shared: not to be
    changed. A model is held weakly, its value let go with it (so a value must not hold its
    model, which would then live as long as the process)."""
    held: dict[int, tuple[weakref.ref[M], V]] = {}

    def gone(ref: weakref.ref[M], key: int) -> None:
        if held.get(key, (None,))[0] is ref:  # not a later model's, that took its id
            del held[key]

    @functools.wraps(make)
    def made(model: M) -> V:
        key = id(model)
        found = held.get(key)
        if found is not None and found[0]() is model:
            return found[1]
        value = make(model)
        held[key] = (weakref.ref(model, functools.partial(gone, key=key)), value)
        return value

    return made


def last(make: Callable[[M], V]) -> Callable[[M], V]:
    """make(model), worked out once for the last model asked (a frozen model's value does not
    change): for what is asked of one result several times in a row (a listing reads its
    headline 14 times), where kept() would hold a value for every model alive. The value is
    shared: not to be changed."""
    held: list[tuple[M, V] | None] = [None]

    @functools.wraps(make)
    def made(model: M) -> V:
        found = held[0]  # one read: another thread may replace it
        if found is None or found[0] is not model:
            found = held[0] = (model, make(model))
        return found[1]

    return made


def shared(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """A field's wrap validator: where the context holds a SHARED table, a value equal to one
    validated before (the same JSON, the same context) is that one's model, validated once
    (an import's 100,000 records hold a few thousand specs and a few dozen environments)."""
    table = info.context.get(SHARED) if info.context else None
    if table is None or not isinstance(value, dict):
        return handler(value)
    try:
        text = (info.field_name, orjson.dumps(value).decode())  # orjson's bytes hold 8 KB
    except orjson.JSONEncodeError:  # an integer past 64 bits: validated on its own
        return handler(value)
    if (found := table.get(text)) is None:
        found = table[text] = handler(value)
    with suppress(KeyError):  # another thread's import let it go, in this moment
        table.move_to_end(text)  # the most recently read last, the least first
        while len(table) > SHARED_MOST:
            table.popitem(last=False)
    return found


def sharing() -> dict[str, OrderedDict[tuple[str, str], BaseModel]]:
    """A validation context's part that has its records share their equal specs and
    environments (shared()): one an import."""
    return {SHARED: OrderedDict()}
