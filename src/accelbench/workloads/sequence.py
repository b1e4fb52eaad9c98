"""Sequence, speech and graph models: the LSTM of seed 001, and seed 002's Conformer and GIN."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.workload import Batch, Workload

if TYPE_CHECKING:
    import torch


def lstm(
    seq_len: int = 200, input_size: int = 16, hidden: int = 256, num_layers: int = 2
) -> Workload:
    """LSTM of Graphcore's IPU-M2000 comparison: 2 layers of 256 units over 200 steps of 16 inputs, one regression output."""
    import torch
    import torch.nn.functional as F

    class Regressor(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(input_size, hidden, num_layers, batch_first=True)
            self.head = torch.nn.Linear(hidden, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(x)  # (batch, seq_len, hidden)
            return self.head(out[:, -1]).squeeze(-1)

    def make_sample(gen: torch.Generator) -> Batch:
        return {
            "x": torch.randn(seq_len, input_size, generator=gen),
            "y": torch.randn((), generator=gen),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.mse_loss(model(batch["x"]), batch["y"])

    return Workload("sequences", Regressor, make_sample, loss)


def conformer_medium(seconds: float = 5.0, label_len: int = 16) -> Workload:
    """Conformer-Medium sized ASR encoder + CTC (transformers Wav2Vec2-Conformer), 5 s of 16 kHz audio."""
    import torch

    # WeNet Conformer-Medium's encoder: 12 blocks, width 256, 4 heads, FFN 2048, conv kernel 15,
    # relative positions; 4233 output characters (AISHELL-1). The front end is wav2vec2's
    # convolutions on raw audio (WeNet uses fbank + conv2d subsampling), strided to WeNet's 40 ms
    # frames: 5*4*2^5 = 640 samples per frame.
    vocab = 4233
    num_samples = int(seconds * 16_000)

    def build_model() -> torch.nn.Module:
        from transformers import Wav2Vec2ConformerConfig, Wav2Vec2ConformerForCTC

        config = Wav2Vec2ConformerConfig(
            hidden_size=256,
            num_hidden_layers=12,
            num_attention_heads=4,
            intermediate_size=2048,
            conv_depthwise_kernel_size=15,
            position_embeddings_type="relative",
            vocab_size=vocab,
            conv_dim=(256,) * 7,
            conv_stride=(5, 4, 2, 2, 2, 2, 2),
            conv_kernel=(10, 4, 3, 3, 3, 2, 2),
            pad_token_id=0,
            ctc_loss_reduction="mean",
        )
        return Wav2Vec2ConformerForCTC(config)

    def make_sample(gen: torch.Generator) -> Batch:
        return {
            "audio": torch.randn(num_samples, generator=gen),
            "labels": torch.randint(1, vocab, (label_len,), generator=gen),  # 0 is CTC's blank
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return model(input_values=batch["audio"], labels=batch["labels"]).loss

    return Workload("utterances", build_model, make_sample, loss)


def gin(num_nodes: int = 24, num_edges: int = 52, features: int = 9, hidden: int = 300) -> Workload:
    """GIN (torch_geometric), 5 layers of 300, graph regression on generated molecule-sized graphs."""
    import torch
    import torch.nn.functional as F

    # Seed 002 trains MPNN-GIN on generated graphs. Sizes here are OGB's GIN baseline for
    # molecules (5 layers, width 300) on graphs of 24 atoms and 26 bonds (52 directed edges), a
    # PCQM4Mv2-like regression target with its L1 loss. Graphs of one size let the default
    # collation stack them; `loss` joins a batch into one disjoint graph.
    class GraphRegressor(torch.nn.Module):
        def __init__(self) -> None:
            from torch_geometric.nn.models import GIN

            super().__init__()
            self.gin = GIN(features, hidden, num_layers=5)
            self.head = torch.nn.Linear(hidden, 1)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            from torch_geometric.nn import global_add_pool

            graphs, nodes, _ = x.shape
            offsets = torch.arange(graphs, device=x.device) * nodes
            edges = (edge_index + offsets[:, None, None]).transpose(0, 1).reshape(2, -1)
            h = self.gin(x.reshape(graphs * nodes, -1), edges)
            which = torch.arange(graphs, device=x.device).repeat_interleave(nodes)
            return self.head(global_add_pool(h, which, size=graphs)).squeeze(-1)

    def make_sample(gen: torch.Generator) -> Batch:
        bonds = torch.randint(num_nodes, (2, num_edges // 2), generator=gen)
        return {
            "x": torch.randn(num_nodes, features, generator=gen),
            "edge_index": torch.cat([bonds, bonds.flip(0)], dim=1),  # both directions
            "y": torch.randn((), generator=gen),
        }

    def loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        return F.l1_loss(model(batch["x"], batch["edge_index"]), batch["y"])

    return Workload("graphs", GraphRegressor, make_sample, loss)
