"""Fuzzing the parsers that take outside input: whatever comes in, the answer is a result or
the tool's own error with a message, never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from accelbench.cli.app import key_values, validation_message
from accelbench.cli.app import percent as parse_percent
from accelbench.errors import AccelbenchError
from accelbench.orchestration.sweep import load_sweep
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec, knobs
from accelbench.records.targets import parse_target
from accelbench.storage import exchange, schema

BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
field_names = st.sampled_from(sorted(knobs())) | st.text(max_size=12)
spec_dicts = st.dictionaries(field_names, values, max_size=8)


def _refused_cleanly(exc: Exception) -> None:
    if isinstance(exc, ValidationError):
        message = validation_message(exc)
    else:
        assert isinstance(exc, AccelbenchError), f"{type(exc).__name__}: {exc}"
        message = str(exc)
    assert message and "\n" not in message.strip(), message


@BOUNDED
@given(spec_dicts)
def test_any_spec_is_accepted_or_refused_with_one_line(fields: dict[str, Any]) -> None:
    valid = {"workload": "tiny_mlp", "batch_size": 4}
    for candidate in (fields, valid | fields):
        try:
            RunSpec.model_validate(candidate)
        except Exception as exc:
            _refused_cleanly(exc)


@BOUNDED
@given(st.dictionaries(st.sampled_from(["fixed", "axes", "global_batch", "other"]), values))
def test_any_sweep_file_is_read_or_refused_with_one_line(table: dict[str, Any]) -> None:
    lines = []
    for key, value in table.items():  # as TOML where it can be, raw text where not
        lines.append(f"{key} = {json.dumps(value)}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "sweep.toml")
        path.write_text("\n".join(lines))
        try:
            load_sweep(path).specs()
        except Exception as exc:
            _refused_cleanly(exc)


@BOUNDED
@given(st.text(max_size=200))
def test_any_sweep_text_is_read_or_refused(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "sweep.toml")
        path.write_text(text)
        try:
            load_sweep(path).specs()
        except Exception as exc:
            _refused_cleanly(exc)


@BOUNDED
@given(st.lists(st.text(max_size=20), max_size=4), st.text(max_size=10), st.text(max_size=30))
def test_command_line_values_parse_or_refuse(pairs: list[str], percent: str, target: str) -> None:
    for parse, arg in ((key_values, pairs), (parse_percent, percent)):
        try:
            parse(arg)  # type: ignore[arg-type]
        except Exception as exc:
            _refused_cleanly(exc)
    try:
        parse_target(target)
    except ValueError as exc:
        assert "is not METRIC<=VALUE" in str(exc)


@BOUNDED
@given(spec_dicts)
def test_any_stored_record_loads_or_is_refused_with_one_line(fields: dict[str, Any]) -> None:
    for text in (json.dumps(fields), json.dumps({"key": "k", "spec": fields}), "{" + str(fields)):
        try:
            Result.model_validate(schema.record(text))
        except Exception as exc:
            _refused_cleanly(exc)


def _paths(node: Any, prefix: tuple[Any, ...] = (), depth: int = 4) -> list[tuple[Any, ...]]:
    """Every path into a JSON document, down to `depth`."""
    out = [prefix]
    if depth and isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k), depth - 1)
    elif depth and isinstance(node, list):
        for i, v in enumerate(node[:2]):
            out += _paths(v, (*prefix, i), depth - 1)
    return out


@BOUNDED
@given(st.data())
def test_any_import_file_is_read_or_refused_with_one_line(
    two_platforms: list[Result], data: st.DataObject
) -> None:
    text = exchange.dumps(two_platforms[:2])
    doc = json.loads(text)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        if not path:
            doc = data.draw(values)
            break
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = data.draw(values)
    raw = json.dumps(doc).encode()
    raw = raw[: data.draw(st.integers(0, len(raw)))] if data.draw(st.booleans()) else raw
    try:
        exchange.parse(raw, "fuzzed.json")
    except Exception as exc:
        _refused_cleanly(exc)
