"""FSDP and tensor parallelism are real: the same losses as one process with the same global
batch, and each rank holding a share of the weights and optimizer state. On the CPU (gloo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from accelbench import workloads
from accelbench.errors import AccelbenchError
from accelbench.execution import sharding
from accelbench.records.spec import RunSpec

GLOBAL_BATCH = 4
STEPS = 3
LAYOUTS: dict[str, dict[str, Any]] = {
    "fsdp over 2": {"fsdp": True, "replicas": 2},
    "fsdp over 2, 2 micro-batches": {"fsdp": True, "replicas": 2, "grad_accum": 2},
    "fsdp over 2, compiled": {"fsdp": True, "replicas": 2, "compile": True},
    "tp 2": {"tensor_parallel": 2},
    "tp 2, sequence parallel": {"tensor_parallel": 2, "sequence_parallel": True},
    "fsdp over 2 x tp 2": {"fsdp": True, "replicas": 2, "tensor_parallel": 2},
}


LORA: dict[str, Any] = {"lora_rank": 4, "lora_alpha": 8.0, "lora_targets": "q_proj,v_proj"}
"""LoRA adapters on the tiny Llama's attention."""
CELLS: dict[str, dict[str, Any]] = {
    "one process": {},
    **LAYOUTS,
    "moe, one process": {"workload": "moe_tiny"},
    "moe, fsdp over 2": {"workload": "moe_tiny", "fsdp": True, "replicas": 2},
    "lora, one process": LORA,
    "lora, fsdp over 2": {"fsdp": True, "replicas": 2, **LORA},
}
"""Every cell the tests compare, by name: a layout of a tiny model (Llama unless named)."""


def spec_of(workload: str = "llama3_tiny", **layout: Any) -> RunSpec:
    """STEPS adamw steps of a tiny model on GLOBAL_BATCH samples, however many micro-batches."""
    micro_batches = layout.get("replicas", 1) * layout.get("grad_accum", 1)
    return RunSpec(
        workload=workload,
        batch_size=GLOBAL_BATCH // micro_batches,
        optimizer="adamw",
        lr=1e-2,
        device="cpu",
        **layout,
    )


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each cell's losses and what each rank held: one launch for the cells of each number of
    processes (one process group for all of them), not one each."""
    folder = tmp_path_factory.mktemp("sharded")
    script = str(Path(__file__).parents[1].joinpath("sharded_steps.py"))
    launches: dict[int, list[tuple[str, RunSpec]]] = {}
    for name, layout in CELLS.items():
        spec = spec_of(**layout)
        launches.setdefault(spec.num_processes if spec.distributed else 0, []).append((name, spec))
    for nproc, cells in launches.items():
        jobs = folder / f"{nproc}.json"
        out = {name: str(folder / f"{name}.json") for name, _ in cells}
        jobs.write_text(json.dumps([[s.model_dump(mode="json"), out[n]] for n, s in cells]))
        subprocess.run(
            [sys.executable, script, str(nproc), str(jobs), str(STEPS)],
            check=True,
            env=os.environ | {"OMP_NUM_THREADS": "1"},
            timeout=600,
        )
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in CELLS}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_sharded_training_matches_one_process(name: str, ran: dict[str, dict[str, Any]]) -> None:
    one_process, sharded = ran["one process"], ran[name]
    # The weights moved (adamw at lr 1e-2), so steps 2 and 3 check the gradients' exchange too.
    assert one_process["losses"][0] - one_process["losses"][-1] > 0.01
    assert sharded["losses"] == pytest.approx(one_process["losses"], rel=1e-4)
    whole = one_process["held_gib"][0]
    held = sharded["held_gib"]
    layout = RunSpec(workload="llama3_tiny", batch_size=1, **LAYOUTS[name])
    assert len(held) == layout.num_processes
    # torchtitan's order: each block compiled on its own, FSDP's gathers outside the graphs.
    assert sharded["compiled_blocks"] == (2 if layout.compile else 0)
    if layout.tensor_parallel == 1:  # every weight and its optimizer state split over the ranks
        assert max(held) == pytest.approx(whole / layout.replicas, rel=0.05)
    else:  # attention and MLP split further; embeddings, norms and head only by FSDP if at all
        assert whole / len(held) < max(held) < 0.8 * whole / layout.replicas


def test_sequence_parallelism_needs_a_llama_shaped_model() -> None:
    with torch.device("meta"):
        model = workloads.get("llama3_tiny").build_model()
    base = sharding.base_of(model)
    plan = sharding.tensor_plan(model, "llama3_tiny", 2)
    styles = sharding.sequence_plan(base, plan, "llama3_tiny")
    # The embedding's output cut, both norms of every block on their part, the final norm whole.
    assert set(styles) == {
        "embed_tokens",
        "layers.*.input_layernorm",
        "layers.*.post_attention_layernorm",
        "norm",
    }
    base.norm = torch.nn.Identity()  # no final norm to gather the sequence for the head
    with pytest.raises(AccelbenchError, match="not shaped for sequence parallelism"):
        sharding.sequence_plan(base, plan, "llama3_tiny")


@pytest.mark.slow
def test_a_sharded_mixture_of_experts_matches_one_process(ran: dict[str, dict[str, Any]]) -> None:
    """The tiny Mixtral under FSDP over 2 ranks: the same losses as one process, each rank
    holding half the weights (its experts' included)."""
    one, sharded = ran["moe, one process"], ran["moe, fsdp over 2"]
    assert one["losses"][0] - one["losses"][-1] > 0.01
    assert sharded["losses"] == pytest.approx(one["losses"], rel=1e-4)
    assert max(sharded["held_gib"]) == pytest.approx(one["held_gib"][0] / 2, rel=0.05)


def test_a_mixture_of_experts_is_refused_tensor_parallelism_in_one_line() -> None:
    with torch.device("meta"):
        model = workloads.get("moe_tiny").build_model()
    with pytest.raises(AccelbenchError, match="leave out --tensor-parallel"):
        sharding.tensor_plan(model, "moe_tiny", 2)


@pytest.mark.slow
def test_lora_under_fsdp_matches_one_process(ran: dict[str, dict[str, Any]]) -> None:
    """LoRA adapters on the tiny Llama's attention, FSDP over 2 ranks holding the frozen
    weights and the adapters alike: the same losses as one process."""
    one, sharded = ran["lora, one process"], ran["lora, fsdp over 2"]
    assert one["losses"][0] - one["losses"][-1] > 0.01
    assert sharded["losses"] == pytest.approx(one["losses"], rel=1e-4)
