"""Raw samples are written packed, read back exactly, and older lists still read."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ValidationError

from accelbench.records.samples import PREFIX, Samples


class Held(BaseModel):
    times: Samples


def test_samples_round_trip_exactly_and_pack_small() -> None:
    times = [0.001 * i * i + 1 / 3 for i in range(1000)]
    held = Held(times=times)
    assert held.times == pytest.approx(times, rel=1e-7)  # float32: under 1e-7 of each value
    text = held.model_dump_json()
    assert json.loads(text)["times"].startswith(PREFIX)
    assert len(text) < 5.5 * len(times)  # a JSON list of these took about 18 a number
    assert len(json.dumps(times)) > 15 * len(times)
    assert Held.model_validate_json(text) == held  # exactly as written
    assert held.model_dump()["times"] == held.times  # Python dumps stay lists


def test_older_lists_read_and_bad_text_is_refused() -> None:
    assert Held.model_validate_json('{"times": [1.5, 2, 3.25]}').times == [1.5, 2.0, 3.25]
    assert Held(times=[]).model_dump_json() == '{"times":"' + PREFIX + '"}'
    for bad, why in [
        ("1,2", "start with 'f4:'"),
        (PREFIX + "@@", "not base64"),
        (PREFIX + "AAA=", "not whole float32"),
    ]:
        with pytest.raises(ValidationError, match=why):
            Held.model_validate({"times": bad})
    with pytest.raises(ValidationError):
        Held.model_validate({"times": [1.0, "a"]})
