"""What is worked out of a frozen model once: kept() values, and the specs and environments an
import's records share."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

import pytest
from pydantic import ValidationError

from accelbench.records import frozen
from accelbench.records.frozen import SHARED, kept, last, sharing
from accelbench.records.result import Result
from accelbench.records.spec import STORED, RunSpec
from accelbench.storage.schema import stored_json

from ..conftest import tiny


def test_a_kept_value_is_made_once_a_model_and_let_go_with_it() -> None:
    made: list[RunSpec] = []

    class Value:
        pass

    @kept
    def value_of(spec: RunSpec) -> Value:
        made.append(spec)
        return Value()

    one, equal = tiny(), tiny()
    assert value_of(one) is value_of(one) and made == [one]
    assert value_of(equal) is not value_of(one) and len(made) == 2  # equal, but another model
    held = weakref.ref(value_of(one))
    del one, made[:]
    gc.collect()
    assert held() is None  # let go with its model


def test_a_last_value_is_made_once_for_the_model_asked_last() -> None:
    made: list[RunSpec] = []

    @last
    def dumped(spec: RunSpec) -> dict[str, Any]:
        made.append(spec)
        return spec.model_dump()

    one, other = tiny(), tiny()
    assert dumped(one) is dumped(one) and made == [one]
    dumped(other)
    dumped(one)  # asked after another: made again
    assert made == [one, other, one]


def test_an_imports_records_share_their_equal_specs_and_environments(
    two_platforms: list[Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [json.loads(stored_json(r)) for r in two_platforms]
    one_import = STORED | sharing()
    shared = [Result.model_validate(r, context=one_import) for r in records]
    alone = [Result.model_validate(r, context=STORED) for r in records]
    assert shared == alone
    for part in ("spec", "env"):
        equal = [
            (i, j)
            for i in range(len(records))
            for j in range(i)
            if records[i][part] == records[j][part]
        ]
        assert equal, part  # the fixture's platforms share specs, and each its environment
        assert all(getattr(shared[i], part) is getattr(shared[j], part) for i, j in equal)
        assert all(getattr(alone[i], part) is not getattr(alone[j], part) for i, j in equal)
    bad = records[0] | {"spec": records[0]["spec"] | {"batch_size": 0}}
    for context in (STORED, STORED | sharing()):
        with pytest.raises(ValidationError) as refused:
            Result.model_validate(bad, context=context)
        assert refused.value.errors()[0]["loc"] == ("spec", "batch_size")
    monkeypatch.setattr(frozen, "SHARED_MOST", 2)
    table = sharing()
    bounded = STORED | table
    env = max((r["env"] for r in records), key=lambda e: sum(r["env"] == e for r in records))
    here = [r for r in records if r["env"] == env][:3]  # three specs, one environment
    first, _, third = [Result.model_validate(r, context=bounded) for r in here]
    assert len(table[SHARED]) == 2
    assert third.env is first.env  # read with each: held, though the first read
    again = Result.model_validate(here[0], context=bounded)
    assert again.spec is not first.spec and again.spec == first.spec  # read least recently
