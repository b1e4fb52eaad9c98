"""What is worked out of a frozen model once: kept() values, and the specs and environments an
import's records share."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from accelbench.records import frozen
from accelbench.records.frozen import SHARED, kept
from accelbench.records.result import Result
from accelbench.records.spec import STORED, RunSpec
from accelbench.storage.schema import stored_json

from ..conftest import tiny


def test_a_kept_value_is_made_once_a_model_for_the_last_models_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[RunSpec] = []

    @kept
    def dumped(spec: RunSpec) -> dict[str, Any]:
        made.append(spec)
        return spec.model_dump()

    one, equal = tiny(), tiny()
    assert dumped(one) is dumped(one) and made == [one]
    assert dumped(equal) == dumped(one) and len(made) == 2  # equal, but another model
    monkeypatch.setattr(frozen, "KEPT", 2)
    for batch in (1, 2, 3):
        dumped(tiny(batch_size=batch))
    dumped(one)  # no longer held: two models at most
    assert len(made) == 6


def test_an_imports_records_share_their_equal_specs_and_environments(
    two_platforms: list[Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [json.loads(stored_json(r)) for r in two_platforms]
    one_import = STORED | {SHARED: {}}
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
    for context in (STORED, STORED | {SHARED: {}}):
        with pytest.raises(ValidationError) as refused:
            Result.model_validate(bad, context=context)
        assert refused.value.errors()[0]["loc"] == ("spec", "batch_size")
    monkeypatch.setattr(frozen, "KEPT", 2)
    table: dict[object, object] = {}
    for record in records:
        Result.model_validate(record, context=STORED | {SHARED: table})
        assert len(table) <= 2
