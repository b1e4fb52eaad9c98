"""Language models from transformers, built from configs with random weights.

Each reads token ids (a .npy file of ids, or random ids), so the same workload trains on real text.
Shapes are the seeds' (seed 002: BERT pre-training phase 1 at SL128 and phase 2 at SL512, SQuAD
fine-tuning at SL384, GPT-2 at SL1024), and the Llama 3 family's as Meta published them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.errors import AccelbenchError
from accelbench.workload import Batch, Tokens, Workload, reading

if TYPE_CHECKING:
    import torch

BERT_VOCAB = 30522  # the uncased WordPiece vocabulary of the published BERT models
BERT_MASK_ID = 103  # [MASK] in that vocabulary
BERT_BASE = {"num_layers": 12, "hidden": 768, "heads": 12}
BERT_LARGE = {"num_layers": 24, "hidden": 1024, "heads": 16}
MASKED_FRACTION = 0.15  # BERT's masked-LM recipe
HF_SEQ_LEN = 512  # hf/ workloads' sequence length unless seq_len is given
LLAMA_SEQ_LEN = 2048
LLAMA3_VOCAB = 128256  # Llama 3's tiktoken-based vocabulary
# The published shapes, from each model's config.json (meta-llama/Llama-3.2-1B, Llama-3.2-3B,
# Llama-3.1-8B, Llama-3.1-70B on the Hugging Face hub): hidden size, MLP size, attention heads,
# key-value heads (grouped-query attention), and whether the output head is the embedding; the
# layer count is each factory's num_layers default.
# (RoPE's frequencies are left at the default: they change no work.)
LLAMA3 = {
    "1b": (2048, 8192, 32, 8, True),
    "3b": (3072, 8192, 24, 8, True),
    "8b": (4096, 14336, 32, 8, False),
    "70b": (8192, 28672, 64, 8, False),
    "tiny": (64, 128, 4, 2, False),  # for tests: the same code at a size a CPU trains at once
}


def bert_base_squad(seq_len: int = 384, num_layers: int = 12) -> Workload:
    """BERT-Base (transformers) fine-tuned for SQuAD question answering, sequence length 384."""
    return _bert_squad(seq_len, **(BERT_BASE | {"num_layers": num_layers}))


def bert_large_squad(seq_len: int = 384, num_layers: int = 24) -> Workload:
    """BERT-Large (transformers) fine-tuned for SQuAD question answering, sequence length 384."""
    return _bert_squad(seq_len, **(BERT_LARGE | {"num_layers": num_layers}))


def bert_base_pretrain_sl128(seq_len: int = 128, num_layers: int = 12) -> Workload:
    """BERT-Base pre-training phase 1: masked LM + next sentence, sequence length 128."""
    return _bert_pretrain(seq_len, **(BERT_BASE | {"num_layers": num_layers}))


def bert_base_pretrain_sl512(seq_len: int = 512, num_layers: int = 12) -> Workload:
    """BERT-Base pre-training phase 2: masked LM + next sentence, sequence length 512."""
    return _bert_pretrain(seq_len, **(BERT_BASE | {"num_layers": num_layers}))


def bert_large_pretrain_sl128(seq_len: int = 128, num_layers: int = 24) -> Workload:
    """BERT-Large pre-training phase 1: masked LM + next sentence, sequence length 128."""
    return _bert_pretrain(seq_len, **(BERT_LARGE | {"num_layers": num_layers}))


def bert_large_pretrain_sl512(seq_len: int = 512, num_layers: int = 24) -> Workload:
    """BERT-Large pre-training phase 2: masked LM + next sentence, sequence length 512."""
    return _bert_pretrain(seq_len, **(BERT_LARGE | {"num_layers": num_layers}))


def gpt2_small(seq_len: int = 1024, num_layers: int = 12) -> Workload:
    """GPT-2 Small (124M, transformers), causal LM, sequence length 1024."""
    return hf_model("gpt2", seq_len=seq_len, n_layer=num_layers, n_embd=768, n_head=12)


def gpt2_medium(seq_len: int = 1024, num_layers: int = 24) -> Workload:
    """GPT-2 Medium (355M, transformers), causal LM, sequence length 1024."""
    return hf_model("gpt2", seq_len=seq_len, n_layer=num_layers, n_embd=1024, n_head=16)


def gpt2_large(seq_len: int = 1024, num_layers: int = 36) -> Workload:
    """GPT-2 Large (774M, transformers), causal LM, sequence length 1024."""
    return hf_model("gpt2", seq_len=seq_len, n_layer=num_layers, n_embd=1280, n_head=20)


def llama3_2_1b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 16) -> Workload:
    """Llama 3.2 1B (transformers LlamaConfig, random weights), causal LM, sequence length 2048."""
    return _llama("1b", seq_len, num_layers)


def llama3_2_3b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 28) -> Workload:
    """Llama 3.2 3B (transformers LlamaConfig, random weights), causal LM, sequence length 2048."""
    return _llama("3b", seq_len, num_layers)


def llama3_1_8b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 32) -> Workload:
    """Llama 3.1 8B (transformers LlamaConfig, random weights), causal LM, sequence length 2048."""
    return _llama("8b", seq_len, num_layers)


def llama3_1_70b(seq_len: int = LLAMA_SEQ_LEN, num_layers: int = 80) -> Workload:
    """Llama 3.1 70B (transformers LlamaConfig, random weights), for memory planning."""
    return _llama("70b", seq_len, num_layers)


def llama2_70b(seq_len: int = 4096, num_layers: int = 80) -> Workload:
    """Llama 2 70B (transformers LlamaConfig, random weights; meta-llama/Llama-2-70b-hf's
    shape: Llama 3 70B's layers with a 32,000-token vocabulary), causal LM, sequence length
    4096: the model of MLPerf Training's LoRA benchmark (examples/mlperf-llama2-70b-lora.toml)."""
    return _llama("70b", seq_len, num_layers, vocab_size=32000)


def llama3_tiny(seq_len: int = 64, num_layers: int = 2) -> Workload:
    """A tiny Llama 3 (hidden 64, 2 layers, vocabulary 512): the Llama code path for tests."""
    return _llama("tiny", seq_len, num_layers, vocab_size=512)


def _llama(size: str, seq_len: int, num_layers: int, vocab_size: int = LLAMA3_VOCAB) -> Workload:
    hidden, mlp, heads, kv_heads, tied = LLAMA3[size]
    return hf_model(
        "llama",
        seq_len=seq_len,
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        tie_word_embeddings=tied,
        max_position_embeddings=max(seq_len, 8192),
    )


def hf_model(model_type: str, seq_len: int = HF_SEQ_LEN, **config: Any) -> Workload:
    """Any transformers architecture by model type (`hf/<model_type>`), random weights: a masked
    LM if transformers has one for it, else a causal LM. `config` overrides the default config."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    head = hf_head(model_type, seq_len, config)
    base = AutoConfig.for_model(model_type, **config)
    auto = AutoModelForCausalLM if head == "causal" else AutoModelForMaskedLM
    vocab = base.vocab_size
    mask_id = getattr(base, "mask_token_id", None) or vocab - 1

    def build_model() -> torch.nn.Module:
        return auto.from_config(base)

    def prepare(record: Batch, gen: torch.Generator) -> Batch:
        if head == "causal":
            return record  # the model shifts the ids into labels itself
        return _masked(record["input_ids"], mask_id, gen)

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        labels = batch.get("labels", batch["input_ids"])
        return model(input_ids=batch["input_ids"], labels=labels).loss

    workload = reading(Tokens(seq_len, vocab), build_model, loss, "sequences", prepare)
    return dataclasses.replace(
        workload,
        analytic_flops=lambda training: analytic_flops(build_model, base, seq_len, training),
        active_share=active_share(base) if active_share(base) < 1 else None,
    )


def analytic_flops(
    build_model: Callable[[], torch.nn.Module], config: Any, seq_len: int, training: bool
) -> float | None:
    """FLOPs of one sequence by the formula of the PaLM paper's appendix B, as torchtitan counts
    them: per token, 6 per weight (forward, and the gradients of inputs and weights) plus
    12 x layers x hidden x sequence length for attention's two matmuls; a third of it for a
    forward pass alone. The weights are all but the embeddings' (a lookup is no matmul), the
    output head included even where it shares the embedding's weights; attention is counted
    over all positions, causal or not. A mixture of experts counts the weights a token runs
    through: its experts' weights times the share of experts it is routed to (active_share).
    None for a model that cannot be built on the meta device."""
    import torch

    try:
        with torch.device("meta"):
            model = build_model()
    except Exception:  # built with host-side initialisation: no count
        return None
    embeddings = [m.weight for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    head = getattr(model, "get_output_embeddings", lambda: None)()
    tied = [e for e in embeddings if isinstance(head, torch.nn.Linear) and head.weight is e]
    matmul_weights: float = sum(p.numel() for p in model.parameters()) - sum(
        e.numel() for e in embeddings if not any(e is t for t in tied)
    )
    matmul_weights -= (1 - active_share(config)) * sum(
        p.numel() for name, p in model.named_parameters() if ".experts." in name
    )
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    attention = 12 * config.num_hidden_layers * config.num_attention_heads * head_dim * seq_len
    per_token = 6 * matmul_weights + attention
    return per_token * seq_len / (1 if training else 3)


def active_share(config: Any) -> float:
    """The share of a mixture of experts' expert weights each token runs through: experts per
    token over experts (1 for a dense model)."""
    experts = getattr(config, "num_local_experts", None) or getattr(config, "num_experts", None)
    per_token = getattr(config, "num_experts_per_tok", None)
    return per_token / experts if experts and per_token else 1.0


def hf_head(model_type: str, seq_len: int, config: dict[str, Any]) -> str:
    """Check a `hf/` workload without importing torch, and return the head it gets ("masked" or
    "causal"). Raises for an unknown model type, a type with no LM head, an unknown config
    field, or a sequence longer than the model's positions."""
    import difflib

    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    if model_type not in CONFIG_MAPPING_NAMES:
        close = difflib.get_close_matches(model_type, CONFIG_MAPPING_NAMES, n=3)
        hint = f"did you mean {' or '.join('hf/' + c for c in close)}? " if close else ""
        raise AccelbenchError(f"transformers has no model type {model_type!r}: {hint}")
    # Encoders (BERT, RoBERTa) have both heads and are trained as masked LMs; decoders only causal.
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        head = "masked"
    elif model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        head = "causal"
    else:
        raise AccelbenchError(
            f"hf/{model_type} has neither a causal nor a masked LM head in transformers; "
            "wrap it as your own model (see examples/my_model.py)"
        )
    default = AutoConfig.for_model(model_type)
    unknown = [k for k in config if not hasattr(default, k)]
    if unknown:
        fields = sorted(k for k in default.to_dict() if not k.startswith("_"))
        close = difflib.get_close_matches(unknown[0], fields, n=1)
        hint = f"did you mean {close[0]}?" if close else f"it has {', '.join(fields)}"
        raise AccelbenchError(f"{unknown[0]!r} is not a field of the {model_type} config: {hint}")
    max_len = _max_positions(AutoConfig.for_model(model_type, **config))
    if max_len is not None and seq_len > max_len:
        raise AccelbenchError(
            f"hf/{model_type} takes at most {max_len} positions: use seq_len <= {max_len} "
            "or raise its position limit in the model args"
        )
    return head


def _max_positions(config: Any) -> int | None:
    for field in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, field, None)
        if isinstance(value, int):
            return value
    return None


def _masked(ids: torch.Tensor, mask_id: int, gen: torch.Generator) -> Batch:
    """Masked-LM inputs: a random 15% of positions hidden, and only they carry a label."""
    import torch

    hidden = torch.rand(ids.shape, generator=gen) < MASKED_FRACTION
    return {
        "input_ids": torch.where(hidden, mask_id, ids),
        "labels": torch.where(hidden, ids, -100),
    }


def _bert_config(num_layers: int, hidden: int, heads: int, seq_len: int) -> Any:
    from transformers import BertConfig

    return BertConfig(
        vocab_size=BERT_VOCAB,
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=max(512, seq_len),
    )


def _segments(seq_len: int) -> Batch:
    import torch

    return {
        "token_type_ids": (torch.arange(seq_len) >= seq_len // 2).long(),  # sentence A | B
        "attention_mask": torch.ones(seq_len, dtype=torch.long),
    }


def _bert_pretrain(seq_len: int, num_layers: int, hidden: int, heads: int) -> Workload:
    """Masked LM + next-sentence prediction. transformers' BertForPreTraining runs the LM head on
    every position; NVIDIA's and Graphcore's BERT gather the masked positions first and so do
    less work per sequence."""
    import torch

    def build_model() -> torch.nn.Module:
        from transformers import BertForPreTraining

        return BertForPreTraining(_bert_config(num_layers, hidden, heads, seq_len))

    def prepare(record: Batch, gen: torch.Generator) -> Batch:
        return (
            _masked(record["input_ids"], BERT_MASK_ID, gen)
            | _segments(seq_len)
            | {"next_sentence_label": torch.randint(2, (), generator=gen)}
        )

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(**batch).loss

    return reading(Tokens(seq_len, BERT_VOCAB), build_model, loss, "sequences", prepare)


def _bert_squad(seq_len: int, num_layers: int, hidden: int, heads: int) -> Workload:
    import torch

    def build_model() -> torch.nn.Module:
        from transformers import BertForQuestionAnswering

        return BertForQuestionAnswering(_bert_config(num_layers, hidden, heads, seq_len))

    def prepare(record: Batch, gen: torch.Generator) -> Batch:
        return (
            record
            | _segments(seq_len)
            | {
                "start_positions": torch.randint(seq_len, (), generator=gen),
                "end_positions": torch.randint(seq_len, (), generator=gen),
            }
        )

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(**batch).loss

    return reading(Tokens(seq_len, BERT_VOCAB), build_model, loss, "sequences", prepare)
