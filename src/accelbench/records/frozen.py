"""The base of every model that crosses a boundary (files, processes, the database), and what
is worked out of one once."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, ValidationInfo, ValidatorFunctionWrapHandler

M = TypeVar("M", bound=BaseModel)
V = TypeVar("V")

KEPT = 4096
"""The models a kept() function holds its values for, and the sub-records an import shares
(shared()): a site's nightly sweep of a few thousand cells on every host, in a few MB."""
SHARED = "shared"
"""The validation context's key of the table shared() keeps, one per import: with it, the
records an import validates share their equal specs and environments."""


class Frozen(BaseModel):
    """Immutable, unknown fields rejected, attribute docstrings as field descriptions."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="strings"
    )


def kept(make: Callable[[M], V]) -> Callable[[M], V]:
    """make(model), worked out once for each of the last KEPT models asked: a frozen model's
    value does not change, and the records an import validates share their specs and
    environments (shared()), so that what is made of one is made once. The value is shared:
    not to be changed. Each model is held beside its value, so that its id names it alone."""
    held: dict[int, tuple[M, V]] = {}

    @functools.wraps(make)
    def made(model: M) -> V:
        found = held.get(id(model))
        if found is not None and found[0] is model:
            return found[1]
        value = make(model)
        if len(held) >= KEPT:
            held.clear()
        held[id(model)] = (model, value)
        return value

    return made


def shared(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    """A field's wrap validator: where the context holds a SHARED table, a value equal to one
    validated before (the same JSON, the same context) is that one's model, validated once
    (an import's 100,000 records hold a few thousand specs and a few dozen environments)."""
    table = info.context.get(SHARED) if info.context else None
    if table is None or not isinstance(value, dict):
        return handler(value)
    try:
        text = (info.field_name, orjson.dumps(value))
    except orjson.JSONEncodeError:  # an integer past 64 bits: validated on its own
        return handler(value)
    if (found := table.get(text)) is None:
        found = handler(value)
        if len(table) >= KEPT:
            table.clear()
        table[text] = found
    return found
