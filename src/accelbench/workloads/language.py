"""Language models from transformers, built from configs with random weights."""

from __future__ import annotations

from accelbench.workload import Batch, Workload


def bert_base_squad() -> Workload:
    """BERT-Base (transformers) fine-tuned for SQuAD question answering, sequence length 384."""
    import torch

    seq_len = 384

    def build_model() -> torch.nn.Module:
        from transformers import BertConfig, BertForQuestionAnswering

        return BertForQuestionAnswering(BertConfig())  # BERT-Base defaults: 12 layers, 768 wide

    def make_sample(gen: torch.Generator) -> Batch:
        vocab_size = 30522  # BertConfig().vocab_size
        return {
            "input_ids": torch.randint(vocab_size, (seq_len,), generator=gen),
            "token_type_ids": (torch.arange(seq_len) >= seq_len // 4).long(),  # question | context
            "attention_mask": torch.ones(seq_len, dtype=torch.long),
            "start_positions": torch.randint(seq_len, (), generator=gen),
            "end_positions": torch.randint(seq_len, (), generator=gen),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(**batch).loss

    return Workload("bert_base_squad", "sequences", build_model, make_sample, loss)
