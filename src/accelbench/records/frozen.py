"""The base of every model that crosses a boundary (files, processes, the database)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable, unknown fields rejected, attribute docstrings as field descriptions."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, ser_json_inf_nan="strings"
    )
