from __future__ import annotations

from typing import get_args

import pytest
import torch

from accelbench.execution.efficiency import (
    PEAK_CLASS,
    PEAKS,
    PeakClass,
    datasheet_peak,
    measured_peak,
)
from accelbench.records.precision import PRECISIONS


def test_every_precision_has_a_peak_class() -> None:
    assert set(PEAK_CLASS) == set(PRECISIONS)


def test_every_table_entry_has_a_source_and_known_classes() -> None:
    for entry in PEAKS:
        assert entry.source.startswith("https://"), entry.name_contains
        assert set(entry.tflops) <= set(get_args(PeakClass))
        assert entry.tflops["fp32"] > 0
        # Tensor-core figures are dense: at least the FP32 figure, at most 16 times it.
        assert all(
            entry.tflops["fp32"] <= v <= 16 * entry.tflops["fp32"] for v in entry.tflops.values()
        )


@pytest.mark.parametrize(
    ("name", "precision", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "amp-bf16", 989.5),
        ("NVIDIA H100 PCIe", "bf16", 756),  # the PCIe entry wins over the SXM one
        ("NVIDIA H200", "tf32", 494.5),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5),
        ("Tesla V100-SXM2-16GB", "amp-fp16", 125),
    ],
)
def test_datasheet_peak_by_device_name(name: str, precision: str, tflops: float) -> None:
    peak = datasheet_peak(name, precision)  # type: ignore[arg-type]
    assert peak is not None and peak[0] == tflops * 1e12 and "datasheet" in peak[1]


def test_no_datasheet_figure_is_no_figure() -> None:
    assert datasheet_peak("Tesla V100-SXM2-16GB", "bf16") is None  # Volta has no bf16
    assert datasheet_peak("Some Future GPU", "fp32") is None


def test_measured_peak_on_this_cpu() -> None:
    flops, how = measured_peak(torch.device("cpu"), "fp32")
    assert 1e8 < flops < 1e14
    assert how == "measured: best 1024x1024 float32 matmul on this device"


def test_attention_on_the_cpu_is_counted_in_inference_and_training() -> None:
    # torch's counter has no formula for the CPU's fused attention kernel: it counted nn.
    # MultiheadAttention's projections only. Per batch of 2 x 128 tokens of width 64: the
    # projections 4 x 2 x 256 x 64 x 64, the scores and their use of the values 2 x 2 x 2 x
    # 128 x 128 x 64.
    from accelbench.execution.efficiency import counter_sees_all, flop_counter

    layer = torch.nn.MultiheadAttention(64, 4, batch_first=True).eval()
    x = torch.randn(2, 128, 64)
    expected = 4 * 2 * 256 * 64 * 64 + 2 * 2 * 2 * 128 * 128 * 64
    with counter_sees_all(), torch.inference_mode(), flop_counter() as counter:
        layer(x, x, x, need_weights=False)
    assert counter.get_total_flops() == expected
    with counter_sees_all(), flop_counter() as counter:
        layer(x, x, x, need_weights=False)[0].sum().backward()
    attention = {str(op) for op in counter.get_flop_counts()["Global"]}
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward" in attention


def test_grouped_query_attention_is_counted_as_its_kernels_work() -> None:
    # Llama 3's 32 query heads over 8 key/value heads: torch 2.11's own formula refused the GPU
    # kernels' shapes, and the H100 run's FLOPs (so its MFU) were lost. The CPU kernel takes the
    # same shapes, so this runs here.
    import torch.nn.functional as F
    from torch.utils import flop_counter as fc

    from accelbench.execution.efficiency import flop_counter

    q = torch.randn(2, 8, 16, 32, requires_grad=True)
    k, v = (torch.randn(2, 2, 16, 32, requires_grad=True) for _ in range(2))
    with flop_counter() as counter:
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True).sum().backward()
    full = (2, 8, 16, 32)
    forward = fc.sdpa_flop_count(full, full, full)
    assert counter.get_total_flops() == forward + fc.sdpa_backward_flop_count(
        full, full, full, full
    )
    aten = torch.ops.aten
    for op in (
        aten._scaled_dot_product_efficient_attention,
        aten._scaled_dot_product_flash_attention,
    ):
        assert counter.flop_registry[op] is not fc.flop_registry[op]  # ours, grouped heads
