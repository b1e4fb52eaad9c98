"""Language models from transformers, built from configs with random weights."""

from __future__ import annotations

from accelbench.workload import Batch, Workload


def bert_base_squad() -> Workload:
    """BERT-Base (transformers) fine-tuned for SQuAD question answering, sequence length 384."""
    return _bert_squad(num_layers=12, hidden=768, heads=12)


def bert_large_squad() -> Workload:
    """BERT-Large (transformers) fine-tuned for SQuAD question answering, sequence length 384."""
    return _bert_squad(num_layers=24, hidden=1024, heads=16)


def _bert_squad(num_layers: int, hidden: int, heads: int, seq_len: int = 384) -> Workload:
    import torch

    vocab_size = 30522  # the uncased WordPiece vocabulary of the published BERT models

    def build_model() -> torch.nn.Module:
        from transformers import BertConfig, BertForQuestionAnswering

        config = BertConfig(
            vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=num_layers,
            num_attention_heads=heads, intermediate_size=4 * hidden,
        )  # fmt: skip
        return BertForQuestionAnswering(config)

    def make_sample(gen: torch.Generator) -> Batch:
        return {
            "input_ids": torch.randint(vocab_size, (seq_len,), generator=gen),
            "token_type_ids": (torch.arange(seq_len) >= seq_len // 4).long(),  # question | context
            "attention_mask": torch.ones(seq_len, dtype=torch.long),
            "start_positions": torch.randint(seq_len, (), generator=gen),
            "end_positions": torch.randint(seq_len, (), generator=gen),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(**batch).loss

    return Workload("sequences", build_model, make_sample, loss)
