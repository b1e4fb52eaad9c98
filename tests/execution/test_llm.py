"""LLM training: Llama shapes, tokens/s and both MFUs, FSDP and tensor parallel through the CLI,
the fewest-devices search and the N-token projection."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from accelbench import workloads
from accelbench.analysis import advice, references, tuning
from accelbench.analysis.objectives import Constraints
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.execution import sharding
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.report.listing import tokens_line
from accelbench.report.results import notes, token_projection_lines
from accelbench.workloads.experts import expert_load

from ..conftest import _with_peak, on_platform, quick

runner = CliRunner()
SHARDED = ["--fsdp", "--replicas", "2", "--tensor-parallel", "2", "--batch-size", "2"]
SHARDED += ["--sequence-parallel"]  # every axis of the layout at once
QUICK = quick()


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Result:
    """The tiny Llama trained on 4 processes, FSDP over 2 x tensor parallel 2, via the CLI."""
    db = tmp_path_factory.mktemp("llm") / "r.sqlite"
    out = runner.invoke(app, ["run", "llama3_tiny", *SHARDED, *QUICK, "--db", str(db)])
    assert out.exit_code == 0, out.output
    with ResultStore(db) as store:
        (result,) = store.query()
    return result


@pytest.mark.slow
def test_fsdp_and_tensor_parallel_train_together_through_the_cli(sharded: Result) -> None:
    m = sharded.metrics
    assert sharded.status == "ok" and m is not None, sharded.reason
    assert m.layout == "fsdp over 2 x tp+sp 2"
    assert len(m.ranks) == 4 and sharded.num_devices == 4
    assert m.items_per_step == 4  # 2 replicas x micro batch 2: tensor parallel adds no data
    assert m.tokens_per_item == 64
    assert m.tokens_per_s == pytest.approx(m.items_per_s * 64)
    # Each rank holds a quarter of the blocks and half of the embeddings and head.
    assert m.state_gib is not None and all(r.state_gib for r in m.ranks)
    one_copy = sum(p.numel() for p in workloads.get("llama3_tiny").build_model().parameters())
    assert m.state_gib < 0.5 * one_copy * 4 * 2 / 2**30  # weights and sgd momentum, fp32
    assert "tokens/s" in "\n".join(notes([sharded]))


def test_analytic_flops_follow_the_palm_formula() -> None:
    """6 per weight but the embeddings' (the untied head counted), plus 12 L H Q T."""
    w = workloads.get("llama3_1_8b", {"seq_len": 8192})
    hidden, mlp, layers, heads, kv, vocab = 4096, 14336, 32, 32, 8, 128256
    head_dim = hidden // heads
    per_layer = hidden * (hidden + 2 * kv * head_dim + hidden) + 3 * hidden * mlp + 2 * hidden
    weights = layers * per_layer + hidden + vocab * hidden  # + final norm, output head
    per_token = 6 * weights + 12 * layers * heads * head_dim * 8192
    assert w.analytic_flops is not None and w.tokens_per_item == 8192
    assert w.analytic_flops(True) == per_token * 8192
    assert w.analytic_flops(False) == pytest.approx(per_token * 8192 / 3)


def test_both_mfus_and_tflops_per_device(sharded: Result) -> None:
    peaked = _with_peak(sharded)  # 1 TFLOP/s per device
    m = peaked.metrics
    assert m is not None and m.flops is not None and m.flops.analytic_per_item is not None
    analytic = m.flops.analytic_per_item
    assert m.mfu_analytic == pytest.approx(analytic * m.items_per_s / (1e12 * 4))
    assert m.mfu == pytest.approx(m.flops.per_item * m.items_per_s / (1e12 * 4))
    assert m.tflops_per_device == pytest.approx(analytic * m.items_per_s / 4 / 1e12)
    line = next(line for line in notes([peaked]) if "tokens/s" in line)
    assert "by 6N + attention" in line and "per rank (fsdp over 2 x tp+sp 2)" in line


def test_days_to_train_n_tokens_are_projected_from_throughput(
    sharded: Result, tmp_path: Path
) -> None:
    m = sharded.metrics
    assert m is not None and m.tokens_per_s is not None
    (line,) = token_projection_lines([sharded], 1e12)
    days = math.ceil(1e12 / 64) / m.items_per_s / 86400
    assert f"= {days:.3g} days" in line
    assert f"{days * 24 * 4:,.0f} device-hours on 4 device(s)" in line
    assert "projected from throughput, not measured" in line
    # As if on 4 GPUs: 4 CPU processes on this host's 2 threads are flagged contended, and
    # advice leaves contended runs out.
    gpus = on_platform(sharded, "Sim GPU", 1.0)
    (answer,) = advice.recommend([gpus], "llama3_tiny", "time-to-train", Constraints(tokens=1e12))
    assert answer.options[0].value == pytest.approx(1e12 / 64 / m.items_per_s / 86400)
    with pytest.raises(AccelbenchError, match="--objective time-to-train"):
        advice.recommend([sharded], "llama3_tiny", "throughput", Constraints(tokens=1e12))
    # A stored report reads its records one at a time for the projection, and shows it.
    db = tmp_path / "t.sqlite"
    with ResultStore(db) as store:
        store.put(sharded)
    done = runner.invoke(app, ["report", "--format", "md", "--tokens", "1e12", "--db", str(db)])
    assert done.exit_code == 0, done.output
    assert f"{days * 24 * 4:,.0f} device-hours on 4 device(s)" in done.output


def test_a_run_is_set_beside_torchtitans_tokens_per_gpu(sharded: Result) -> None:
    assert sharded.metrics is not None
    h100 = on_platform(
        sharded,
        "NVIDIA H100 80GB HBM3",
        1.0,
        workload="llama3_1_8b",
        model_args={"seq_len": 8192},
        tensor_parallel=1,
        sequence_parallel=False,
        replicas=8,
    )
    assert h100.metrics is not None
    h100 = h100.model_copy(
        update={"metrics": h100.metrics.model_copy(update={"tokens_per_item": 8192})}
    )
    found = references.match(h100)
    assert found is not None and found.reference.variant == "FSDP"  # not the compiled row
    assert found.published == 5762  # tokens/s per GPU as published, not divided again
    assert found.measured == pytest.approx(sharded.metrics.items_per_s * 8192 / 8)
    assert "torchtitan" in found.reference.source and "llama3_h100" in found.reference.source
    # A compiled fp8 run is set beside torchtitan's Float8 row.
    fp8 = h100.model_copy(
        update={"spec": h100.spec.model_copy(update={"precision": "fp8", "compile": True})}
    )
    found = references.match(fp8)
    assert found is not None and found.reference.variant == "FSDP + torch.compile + Float8"
    assert found.published == 8532


def test_a_run_is_set_beside_megatron_bridges_gpt_oss_120b(sharded: Result) -> None:
    """Megatron-Bridge's DGX-H100 GPT-OSS 120B pre-training figure (64 GPUs, micro batch 4,
    sequence length 4096): tokens/s per GPU, matched as torchtitan's are."""
    h100 = on_platform(
        sharded,
        "NVIDIA H100 80GB HBM3",
        1.0,
        workload="gpt_oss_120b",
        model_args={"seq_len": 4096},
        batch_size=4,
        tensor_parallel=1,
        sequence_parallel=False,
        replicas=64,
    )
    assert h100.metrics is not None and sharded.metrics is not None
    h100 = h100.model_copy(
        update={"metrics": h100.metrics.model_copy(update={"tokens_per_item": 4096})}
    )
    found = references.match(h100)
    assert found is not None and "Megatron-Bridge" in found.reference.source
    assert found.published == 5630
    assert found.measured == pytest.approx(sharded.metrics.items_per_s * 4096 / 64)
    assert "micro batch" not in " ".join(found.differences)
    elsewhere = h100.model_copy(update={"spec": h100.spec.model_copy(update={"batch_size": 2})})
    near = references.match(elsewhere)  # the nearest figure, its difference said
    assert near is not None and "micro batch 2 against 4 published" in near.differences


def test_fewest_devices_doubles_then_bisects(sharded: Result) -> None:
    asked: list[int] = []

    def measure(n: int) -> Result:  # fits on 5 devices or more
        asked.append(n)
        spec = sharded.spec.model_copy(update={"replicas": n})
        return Result.new(spec, sharded.env, "oom") if n < 5 else sharded

    found = tuning.fewest_devices(measure, start=1, most=16, budget=tuning.Budget(60))
    assert found.fewest == 5 and asked == [1, 2, 4, 8, 6, 5]
    found = tuning.fewest_devices(measure, start=1, most=3, budget=tuning.Budget(60))
    assert found.fewest is None and asked[-2:] == [2, 3]


def test_weights_and_optimizer_state_bound_the_device_count() -> None:
    spec = RunSpec(workload="llama3_1_70b", batch_size=1, fsdp=True, optimizer="adamw")
    fewest, text = sharding.fewest_for_state(spec, 80.0)
    with torch.device("meta"):
        weights = sum(p.numel() for p in workloads.get("llama3_1_70b").build_model().parameters())
    assert fewest == math.ceil(weights * 16 / 2**30 / 80)  # fp32 weights, grads, two moments
    assert "at least" in text and "16 bytes" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fsdp-offload"], "--fsdp-offload offloads FSDP's shards: add --fsdp"),
        (["--fsdp", "--precision", "amp-fp16"], "amp-fp16 scales the loss"),
        (["--tensor-parallel", "3"], "num_attention_heads 4, which 3 devices cannot split"),
        (["--tensor-parallel", "2", "--pipeline-stages", "2"], "not combined with --fsdp"),
        (["--fsdp", "--scenario", "infer"], "infer runs one process"),
        (["--sequence-parallel"], "--sequence-parallel splits tensor-parallel work"),
    ],
)
def test_sharding_knobs_that_cannot_work_are_refused(
    args: list[str], message: str, tmp_path: Path
) -> None:
    db = tmp_path / "r.sqlite"
    out = runner.invoke(app, ["run", "llama3_tiny", *args, *QUICK, "--db", str(db)])
    assert out.exit_code == 2 and message in out.output, out.output
    assert not db.exists()


def test_a_model_without_a_tensor_parallel_plan_is_refused_before_any_cell(tmp_path: Path) -> None:
    out = runner.invoke(app, ["run", "tiny_mlp", "--tensor-parallel", "2", *QUICK])
    assert out.exit_code == 2 and "publishes no tensor-parallel plan" in out.output


def test_fewest_devices_needs_fsdp() -> None:
    out = runner.invoke(app, ["tune", "llama3_tiny", "--fewest-devices", "--device", "cpu"])
    assert out.exit_code == 2 and "add --fsdp" in out.output


def test_fewest_devices_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["tune", "llama3_tiny", "--fewest-devices", "--fsdp", "--min-batch", "2", *QUICK]
    out = runner.invoke(app, [*args, "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "fewest devices: 1 (bs=2 fsdp fp32)" in out.output
    with ResultStore(db) as store:
        assert [r.spec.fsdp for r in store.query()] == [True]


def test_tune_searches_the_micro_batch_at_each_device_count_when_sharded(tmp_path: Path) -> None:
    """What fits under FSDP depends on the device count: the batch search runs at each."""
    db = tmp_path / "r.sqlite"
    args = ["tune", "llama3_tiny", "--fsdp", "--replicas", "1,2", "--max-batch", "1", *QUICK]
    out = runner.invoke(app, [*args, "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "x1 replicas, fsdp: largest micro batch tried: 1" in out.output
    assert "x2 replicas, fsdp: largest micro batch tried: 1" in out.output
    with ResultStore(db) as store:
        assert sorted(r.spec.replicas for r in store.query()) == [1, 2]


def test_gpt_oss_20b_counts_its_published_parameters_and_active_ones() -> None:
    """21B weights, 3.6B active per token (OpenAI's gpt-oss model card): the analytic FLOPs
    count a token's experts only, 4 of 32, so MFU is on the active parameters."""
    import torch

    from accelbench import workloads

    workload = workloads.get("gpt_oss_20b")
    with torch.device("meta"):
        model = workload.build_model()
    assert sum(p.numel() for p in model.parameters()) > 20e9  # test_workloads: 20.9B
    seq, layers, heads, head_dim = 2048, 24, 64, 64
    flops = (workload.analytic_flops(True) if workload.analytic_flops else None) or 0.0
    active = (flops / seq - 12 * layers * heads * head_dim * seq) / 6  # less attention's share
    assert active == pytest.approx(3.6e9, rel=0.01) and workload.active_share == 4 / 32


FINE_TUNE = ["--batch-size", "4", "--optimizer", "adamw", "--lr", "0.01", "--epochs", "3"]
FINE_TUNE += ["--steps-per-epoch", "6", "--window-steps", "2", "--device", "cpu"]


def _trains(db: Path, *args: str) -> tuple[Result, str]:
    """A short adamw run through the CLI whose loss falls: its result and output."""
    done = CliRunner().invoke(app, ["run", *args, *FINE_TUNE, "--db", str(db)])
    assert done.exit_code == 0, done.output
    with ResultStore(db) as store:
        (r,) = store.query()
    m = r.metrics
    assert r.status == "ok" and m is not None and m.flops is not None
    assert m.epochs[-1].loss_last < m.epochs[0].loss_mean  # type: ignore[operator]
    return r, done.output


def test_a_tiny_mixture_of_experts_trains_through_the_cli(tmp_path: Path) -> None:
    r, _ = _trains(tmp_path / "r.sqlite", "moe_tiny")
    m = r.metrics
    assert m is not None and m.flops is not None
    assert m.flops.active_share == 0.5 and m.tokens_per_s
    with torch.device("meta"):
        total = sum(p.numel() for p in workloads.get("moe_tiny").build_model().parameters())
    # Half the experts' weights a token: below 6 per weight of them all, attention included.
    assert m.flops.analytic_per_item and m.flops.analytic_per_item < 6 * total * 64
    peak = m.flops.model_copy(update={"peak_per_s": 1e12, "peak_source": "constructed"})
    peaked = r.model_copy(update={"metrics": m.model_copy(update={"flops": peak})})
    assert "by 6N + attention (N active: 0.5 of the experts' weights)" in tokens_line(peaked)
    # Its routers' balance, per MoE layer: the busiest expert gets an even share or more.
    assert m.expert_load is not None and len(m.expert_load) == 2
    assert all(1.0 <= load <= 2.0 for load in m.expert_load)  # 4 experts, 2 a token: at most 2x
    assert "busiest expert" in tokens_line(r)


class _Routed(torch.nn.Module):
    """A stand-in mixture of experts whose routers send 3 tokens of 4 to expert 0 (layer 1)
    and 2 to each of 2 experts (layer 2), one expert a token."""

    config = SimpleNamespace(num_experts_per_tok=1)

    def forward(self, input_ids: torch.Tensor, output_router_logits: bool) -> SimpleNamespace:
        uneven = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
        return SimpleNamespace(router_logits=(uneven, uneven[[0, 3, 0, 3]]))


def test_expert_load_is_the_busiest_experts_tokens_over_an_even_share() -> None:
    ids = torch.zeros(1, 4, dtype=torch.long)
    assert expert_load(_Routed(), {"input_ids": ids}) == [1.5, 1.0]  # 3 of 4 over 2; 2 over 2
    dense = workloads.get("llama3_tiny").build_model()
    assert expert_load(dense, {"input_ids": ids}) is None


def test_lora_fine_tunes_its_adapters_only_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    lora = ["llama3_tiny", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj"]
    r, output = _trains(db, *lora)
    m = r.metrics
    assert m is not None and m.flops is not None
    # Per layer: q_proj 64 -> 64 and v_proj 64 -> 32 (2 key-value heads of 16), each adapter
    # A (8 x in) and B (out x 8); 2 layers.
    assert m.trainable_params == 2 * ((8 * 64 + 64 * 8) + (8 * 64 + 32 * 8))
    assert m.flops.analytic_per_item is None  # 6 per weight does not hold for frozen ones
    assert "lora r8" in output and "LoRA rank 8: 3,584 trainable weights" in output
    args = ["run", *lora[:3], "--lora-targets", "nowhere", *FINE_TUNE, "--db", str(db)]
    wrong = CliRunner().invoke(app, args)
    assert wrong.exit_code == 1 and "--lora-targets nowhere: Target modules" in wrong.output
    bare = CliRunner().invoke(app, ["run", "llama3_tiny", "--lora-alpha", "32", "--db", str(db)])
    assert bare.exit_code == 2 and "add --lora-rank" in bare.output


def test_the_mlperf_lora_example_is_its_reference_configuration() -> None:
    """examples/mlperf-llama2-70b-lora.toml: MLPerf's Llama 2 70B LoRA settings, its adapters
    counted on the meta device against the count by hand."""
    pytest.importorskip("peft")
    from accelbench.execution import lora
    from accelbench.orchestration.sweep import load_sweep

    example = Path(__file__).parents[2] / "examples" / "mlperf-llama2-70b-lora.toml"
    (spec,) = load_sweep(example).specs()
    shown = (spec.num_processes, spec.global_batch, spec.fsdp, spec.precision, spec.recompute)
    assert shown == (8, 8, True, "amp-bf16", True)
    assert (spec.lora_rank, spec.lora_alpha, spec.model_args) == (16, 32.0, {"seq_len": 8192})
    with torch.device("meta"):
        model = lora.adapt(workloads.get(spec.workload, spec.model_args).build_model(), spec)
    # Rank 16 on q and o (8,192 -> 8,192) and k and v (8,192 -> 1,024: 8 key-value heads of
    # 128): A is 16 x in, B out x 16; 80 layers.
    square, narrow = 16 * 8192 + 8192 * 16, 16 * 8192 + 1024 * 16
    assert lora.trainable(model) == 80 * (2 * square + 2 * narrow)  # 65,536,000
