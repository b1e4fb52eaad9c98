"""Mixtures of experts: the published shapes (GPT-OSS 20B and 120B, Mixtral 8x7B, a tiny one for
tests),
built as any transformers model is (language.hf_model), and the routers' balance a run records.
Their analytic FLOPs count the experts a token runs through (language.active_share)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.workload import Batch, Workload
from accelbench.workloads.language import LLAMA_SEQ_LEN, hf_model

if TYPE_CHECKING:
    import torch

# Mixtures of experts at published shapes. gpt-oss-20b as openai/gpt-oss-20b's config.json gives
# it (24 layers, hidden and expert MLP 2880, 64 heads of 64, 8 key-value heads, 32 experts of
# which 4 run per token, vocabulary 201,088; transformers' GptOssConfig defaults are the 120B's);
# Mixtral 8x7B as transformers' MixtralConfig defaults give it (mistralai/Mixtral-8x7B-v0.1: 32
# layers, hidden 4096, expert MLP 14336, 32 heads, 8 key-value heads, 8 experts, 2 per token,
# vocabulary 32,000).
GPT_OSS_20B = {
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "vocab_size": 201088,
}


GPT_OSS_120B = GPT_OSS_20B | {"num_local_experts": 128}
"""openai/gpt-oss-120b's config.json: gpt-oss-20b's layers, 128 experts, 36 layers."""


def gpt_oss_120b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 36) -> Workload:
    """GPT-OSS 120B (transformers GptOssConfig, random weights): mixture of experts, 4 of 128;
    Megatron-Bridge's published H100 figure is in references.csv."""
    return hf_model(
        "gpt_oss",
        seq_len=seq_len,
        num_hidden_layers=num_layers,
        max_position_embeddings=max(seq_len, 131072),
        **GPT_OSS_120B,
    )


def gpt_oss_20b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 24) -> Workload:
    """GPT-OSS 20B (transformers GptOssConfig, random weights): mixture of experts, 4 of 32."""
    return hf_model(
        "gpt_oss",
        seq_len=seq_len,
        num_hidden_layers=num_layers,
        max_position_embeddings=max(seq_len, 131072),  # its YaRN: 4,096 x 32
        **GPT_OSS_20B,
    )


def mixtral_8x7b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 32) -> Workload:
    """Mixtral 8x7B (transformers MixtralConfig, random weights): mixture of experts, 2 of 8."""
    return hf_model(
        "mixtral",
        seq_len=seq_len,
        num_hidden_layers=num_layers,
        max_position_embeddings=max(seq_len, 8192),
    )


def moe_tiny(seq_len: int = 64, num_layers: int = 2) -> Workload:
    """A tiny Mixtral (hidden 64, 4 experts, 2 per token, vocabulary 512): MoE code for tests."""
    return hf_model(
        "mixtral",
        seq_len=seq_len,
        num_hidden_layers=num_layers,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        vocab_size=512,
        max_position_embeddings=max(seq_len, 8192),
    )


def expert_load(model: torch.nn.Module, batch: Batch) -> list[float] | None:
    """Per mixture-of-experts layer, the busiest expert's tokens over an even share (1.0: every
    expert got as many; experts per token / experts of the tokens each), as the routers sent one
    batch (a forward without gradients, after the timed steps); None for a dense model."""
    import torch

    config = getattr(model, "config", None)
    per_token = getattr(config, "num_experts_per_tok", None)
    if not per_token:
        return None
    with torch.no_grad():
        out = model(input_ids=batch["input_ids"], output_router_logits=True)
    loads = []
    for logits in getattr(out, "router_logits", None) or ():
        chosen = logits.float().topk(per_token, dim=-1).indices.flatten()
        counts = torch.bincount(chosen, minlength=logits.shape[-1]).float()
        loads.append(float(counts.max() / counts.mean()))
    return loads or None
