from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pydantic import ValidationError

from accelbench.cell.environment import capture
from accelbench.errors import AccelbenchError
from accelbench.orchestration.sweep import grid
from accelbench.records.result import Result, cell_hash, cell_key, cell_of, result_key
from accelbench.records.spec import RunSpec, hashed, stable_hash, stable_text

from ..conftest import tiny


def test_defaults_and_derived_batch() -> None:
    spec = RunSpec(workload="resnet50", batch_size=8, grad_accum=3)
    assert (spec.epochs, spec.precision, spec.device, spec.replicas) == (2, "fp32", "auto", 1)
    assert spec.global_batch == 24


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("batch_size", 0),
        ("batch_size", -4),
        ("epochs", 0),
        ("precision", "fp4"),
        ("device", "tpu"),
        ("grad_accum", 0),
        ("lr", 0.0),
        ("workers", -1),
    ],
)
def test_invalid_values_are_rejected(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RunSpec.model_validate({"workload": "tiny_mlp", "batch_size": 2, field: value})
    assert info.value.errors()[0]["loc"][0] == field  # a union's branch follows it


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        RunSpec.model_validate({"workload": "tiny_mlp", "batch_size": 2, "batchsize": 3})


def test_unknown_workload_suggests_the_closest_name() -> None:
    with pytest.raises(AccelbenchError, match="did you mean resnet50"):
        RunSpec(workload="resnet_50", batch_size=2)


def test_spec_is_frozen() -> None:
    spec = RunSpec(workload="tiny_mlp", batch_size=2)
    with pytest.raises(ValidationError):
        spec.batch_size = 4  # type: ignore[misc]


def test_spec_survives_json() -> None:
    spec = RunSpec(workload="tiny_mlp", batch_size=2, precision="amp-bf16", compile=True)
    assert RunSpec.model_validate_json(spec.model_dump_json()) == spec


def test_grid_is_the_product_in_order() -> None:
    specs = grid(
        {"batch_size": [2, 4], "precision": ["fp32", "bf16"]}, workload="tiny_mlp", epochs=1
    )
    assert [(s.batch_size, s.precision) for s in specs] == [
        (2, "fp32"),
        (2, "bf16"),
        (4, "fp32"),
        (4, "bf16"),
    ]
    assert all(s.epochs == 1 for s in specs)


def test_stable_hash_depends_on_content_not_order() -> None:
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})
    assert stable_hash({"a": 1}) != stable_hash({"a": 2})
    # The canonical form is compact JSON with sorted keys, so keys stay the same across machines.
    assert stable_hash({"a": 1}) == hashlib.sha256(b'[{"a":1}]').hexdigest()[:20]


def test_a_hash_of_its_parts_texts_is_the_hash_of_its_parts() -> None:
    """result_key hashes the texts of the spec's identity and the environment's fingerprint,
    each made once (a site's records share them): the keys stored by stable_hash are kept."""
    parts: tuple[object, ...] = (
        {"b": [1.5, None, "é"], "a": {"y": True, "x": 2**70}},
        "host ü",
        [],
        0.1,
    )
    for some in (parts, parts[:2], parts[:1], ()):
        whole = json.dumps(some, sort_keys=True, separators=(",", ":")).encode()
        assert hashed(*map(stable_text, some)) == hashlib.sha256(whole).hexdigest()[:20]
        assert stable_hash(*some) == hashed(*map(stable_text, some))
    spec, env = tiny(), capture("cpu")
    assert result_key(spec, env) == stable_hash(spec.identity(), env.fingerprint())


@pytest.mark.parametrize("big", [0, 2**70], ids=["in 64 bits", "past 64 bits"])
@pytest.mark.parametrize("host", ["node01", "nœud-ü"])
def test_a_cells_hash_is_the_hash_of_its_key(big: int, host: str) -> None:
    """cell_hash hashes its spec's part once and carries the hash on with its environment's:
    the same hash as of cell_key's whole text, which json writes past 64 bits (escaping the
    host name orjson writes as it is)."""
    env = capture("cpu").model_copy(update={"hostname": host})
    result = Result.new(tiny(model_args={"width": big}), env, "oom", reason="simulated")
    variants: list[dict[str, Any]] = [
        {},
        {"ignore": ("batch_size",)},
        {"platform": False},
        {"ignore": ("grad_accum",), "replicas": 1, "nodes": 1},
    ]
    for variant in [*variants, *variants]:  # the second time, from the hash begun
        key = cell_key(result, **variant)
        assert cell_hash(result, **variant) == hashlib.sha256(key.encode()).hexdigest()[:20]


@pytest.mark.parametrize("big", [0, 2**70], ids=["in 64 bits", "past 64 bits"])
def test_a_cells_key_is_its_content_less_the_repeat(big: int) -> None:
    # orjson writes it, json where orjson refuses (an integer past 64 bits).
    assert cell_of({"repeat": 0, "b": big, "a": {"y": 1, "x": 2}}, {"gpu": "H100"}) == (
        f'[{{"a":{{"x":2,"y":1}},"b":{big}}},{{"gpu":"H100"}}]'
    )
    assert cell_of({"repeat": 0, "b": big}, None) == cell_of({"repeat": 1, "b": big}, None)
    assert cell_of({"repeat": 0, "b": big}, None) != cell_of({"repeat": 0, "b": big + 1}, None)
    assert cell_of({"repeat": 0, "b": big}, None, ignore=("b",)) == '[{"b":null},null]'


def test_fields_added_later_keep_earlier_keys() -> None:
    spec = RunSpec(workload="tiny_mlp", batch_size=4)
    first_release = spec.model_dump(mode="json")
    # Every field of 0.1.0's RunSpec; anything added since must keep today's keys unchanged.
    first_fields = {
        "workload",
        "scenario",
        "device",
        "batch_size",
        "grad_accum",
        "epochs",
        "steps_per_epoch",
        "precision",
        "compile",
        "channels_last",
        "optimizer",
        "lr",
        "workers",
        "window_steps",
        "seed",
    }
    for field in set(first_release) - first_fields:
        del first_release[field]
    assert spec.identity() == first_release  # a result stored by 0.1.0 is found again
    assert RunSpec(workload="tiny_mlp", batch_size=4, data="x").identity()["data"] == "x"
    changed = RunSpec(workload="tiny_mlp", batch_size=4, model_args={"seq_len": 8})
    assert stable_hash(changed.identity()) != stable_hash(spec.identity())


def test_workers_auto_leaves_the_cpu_to_the_model_and_feeds_an_accelerator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    auto = RunSpec(workload="tiny_mlp", batch_size=8, workers="auto")
    assert RunSpec(workload="tiny_mlp", batch_size=8, workers=3).loader_workers() == 3
    assert auto.model_copy(update={"device": "cpu"}).loader_workers() == 0
    assert auto.model_copy(update={"device": "cuda"}).loader_workers() == 8  # at most 8
    four = auto.model_copy(update={"device": "cuda", "replicas": 4})
    assert four.loader_workers() == 3  # 16 CPUs among 4 ranks, one left to each
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert four.loader_workers() == 1  # never none on an accelerator
    assert RunSpec(workload="tiny_mlp", batch_size=8, workers="4").workers == 4
    with pytest.raises(ValidationError):
        RunSpec(workload="tiny_mlp", batch_size=8, workers="many")


def test_a_scenarios_own_knobs_sit_in_its_settings_and_read_flat() -> None:
    from accelbench.scenarios.serve import ServeSettings

    flat = {"workload": "served/m", "scenario": "serve", "batch_size": 2}
    spec = RunSpec.model_validate(flat | {"endpoint": "http://h:8000/v1", "rate_per_s": "2"})
    own = ServeSettings.of(spec)
    assert (own.endpoint, own.rate_per_s) == ("http://h:8000", 2.0)  # its own checks ran
    dumped = spec.model_dump(mode="json")
    assert "settings" not in dumped and dumped["endpoint"] == "http://h:8000"
    assert RunSpec.model_validate_json(spec.model_dump_json()) == spec
    assert spec.knob("endpoint") == "http://h:8000" and spec.knob("target") is None
    with pytest.raises(KeyError):
        spec.knob("no_such_knob")
    # The key is what the flat spec of before gave: own knobs at their default left out.
    assert "num_queries" not in spec.identity() and spec.identity()["rate_per_s"] == 2.0
    copied = spec.model_copy(update={"rate_per_s": 4.0})
    assert ServeSettings.of(copied).rate_per_s == 4.0 and copied.knob("endpoint") == own.endpoint


def test_another_scenarios_knob_is_refused_unless_it_is_its_default_or_stored() -> None:
    from accelbench.records.spec import STORED

    with pytest.raises(ValidationError, match="--endpoint goes with --scenario serve"):
        RunSpec.model_validate({"workload": "tiny_mlp", "batch_size": 4, "endpoint": "http://h"})
    with pytest.raises(ValidationError, match="--prompt-tokens goes with --scenario generate"):
        RunSpec.model_validate({"workload": "tiny_mlp", "batch_size": 4, "prompt_tokens": 256})
    # A command line gives every option, most at their defaults: those are no one's choice.
    plain = RunSpec.model_validate(
        {"workload": "tiny_mlp", "batch_size": 4, "prompt_tokens": "128", "rate_per_s": None}
    )
    assert plain == RunSpec(workload="tiny_mlp", batch_size=4)
    # A record stored before the nesting may hold one that was allowed then: it still reads.
    old = {"workload": "tiny_mlp", "batch_size": 4, "prompt_tokens": 256}
    assert RunSpec.model_validate(old, context=STORED) == plain
