from __future__ import annotations

from typing import get_args

import pytest
import torch

from accelbench.errors import AccelbenchError
from accelbench.execution.engine import TorchEngine
from accelbench.records.precision import PRECISIONS, Precision, check_supported, runs_on
from accelbench.workloads import get

from ..conftest import tiny


def test_table_and_type_agree() -> None:
    assert set(PRECISIONS) == set(get_args(Precision))


@pytest.mark.parametrize(
    ("precision", "device", "capability", "expected"),
    [
        ("fp32", "cpu", None, True),
        ("tf32", "cpu", None, False),
        ("tf32", "cuda", (8, 0), True),
        ("tf32", "cuda", (7, 0), False),  # V100: no TF32
        ("bf16", "cuda", (7, 5), False),  # T4: no bfloat16
        ("amp-bf16", "cuda", (9, 0), True),
        ("amp-fp16", "cuda", (7, 0), True),
        ("amp-bf16", "mps", None, False),
        ("fp8", "cuda", (9, 0), True),  # H100
        ("fp8", "cuda", (8, 0), False),  # A100: no float8 tensor cores
        ("fp8", "cpu", None, False),
    ],
)
def test_runs_on(
    precision: str, device: str, capability: tuple[int, int] | None, expected: bool
) -> None:
    assert runs_on(precision, device, capability) is expected


def test_unsupported_precision_names_the_ones_that_run() -> None:
    with pytest.raises(
        AccelbenchError, match=r"tf32 cannot run on this cpu device; use one of: fp32, "
    ):
        check_supported("tf32", "cpu", None)
    with pytest.raises(AccelbenchError, match=r"needs compute capability 8\.0\+"):
        check_supported("bf16", "cuda", (7, 0))


TRAINING = [p for p, info in PRECISIONS.items() if not info.inference_only]


@pytest.mark.parametrize("precision", [p for p in TRAINING if runs_on(p, "cpu", None)])
def test_each_cpu_precision_sets_dtypes_and_trains(precision: str) -> None:
    info = PRECISIONS[precision]
    engine = TorchEngine(get("tiny_mlp"), tiny(precision=precision), torch.device("cpu"))
    assert {p.dtype for p in engine.model.parameters()} == {getattr(torch, info.param_dtype)}
    assert (engine.scaler is not None) is info.grad_scaler
    expected_tf32 = "tf32" if info.tf32 else "ieee"
    assert torch.backends.cudnn.conv.fp32_precision == expected_tf32  # type: ignore[attr-defined]
    gen = torch.Generator().manual_seed(0)
    batch = torch.utils.data.default_collate([get("tiny_mlp").make_sample(gen) for _ in range(4)])
    before = [p.detach().clone() for p in engine.model.parameters()]
    loss = engine.step([batch])
    assert torch.isfinite(loss)
    assert any(
        not torch.equal(a, b) for a, b in zip(before, engine.model.parameters(), strict=True)
    )


def test_int8_dynamic_quantises_linear_layers_for_inference_only() -> None:
    from accelbench.scenarios.epochs import count_flops
    from accelbench.scenarios.infer.measure import Forward

    spec = tiny(scenario="infer", precision="int8-dynamic")
    forward = Forward(get("tiny_mlp"), spec, torch.device("cpu"))
    modules = list(forward.eager.modules())
    assert not any(type(m) is torch.nn.Linear for m in modules)
    assert sum("quantized.dynamic" in type(m).__module__ for m in modules) == 2  # both layers
    gen = torch.Generator().manual_seed(0)
    batch = torch.utils.data.default_collate([get("tiny_mlp").make_sample(gen) for _ in range(4)])
    assert torch.isfinite(forward(batch))
    assert count_flops(spec, get("tiny_mlp"), forward, batch, torch.device("cpu")) is None
    with pytest.raises(ValueError, match="precision int8-dynamic is for inference"):
        tiny(precision="int8-dynamic")
    with pytest.raises(AccelbenchError, match="precision int8-dynamic cannot run on this cuda"):
        check_supported("int8-dynamic", "cuda", (9, 0))


def test_torch_settings_are_the_one_place_a_precision_is_applied() -> None:
    from accelbench.execution.precision import torch_settings

    amp = torch_settings("amp-fp16")
    assert (amp.param_dtype, amp.autocast_dtype, amp.grad_scaler) == (
        torch.float32,
        torch.float16,
        True,
    )
    with amp.autocast("cpu"):
        assert torch.is_autocast_enabled("cpu")
    plain = torch_settings("bf16")
    assert (plain.param_dtype, plain.autocast_dtype, plain.grad_scaler) == (
        torch.bfloat16,
        None,
        False,
    )
    torch_settings("tf32")
    assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    torch_settings("fp32")  # turns it off again: cuDNN would otherwise default to TF32
    assert torch.backends.cuda.matmul.fp32_precision == "ieee"
    assert not torch.backends.cudnn.allow_tf32


def test_fp8_swaps_the_linear_layers_for_torchaos_float8_ones_but_not_the_head() -> None:
    from accelbench.execution.precision import to_float8

    model = get("llama3_tiny").build_model()
    to_float8(model)
    kinds = {name: type(m).__name__ for name, m in model.named_modules()}
    assert sum(kind == "Float8Linear" for kind in kinds.values()) == 14  # 7 per block, 2 blocks
    assert kinds["lm_head"] == "Linear"
    # Where it cannot run: one line naming what can, before any cell.
    with pytest.raises(AccelbenchError, match=r"fp8 cannot run on this cuda device \(needs "):
        check_supported("fp8", "cuda", (8, 0))
    with pytest.raises(ValueError, match="precision fp8 trains on one device"):
        tiny(workload="llama3_tiny", precision="fp8", scenario="infer")
