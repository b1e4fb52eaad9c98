from __future__ import annotations

import pytest
import torch

from accelbench.errors import is_oom, one_line


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (MemoryError(), True),
        (
            RuntimeError(
                "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"
            ),
            True,
        ),
        (RuntimeError("MPS backend out of memory"), True),
        (RuntimeError("CUDNN_STATUS_ALLOC_FAILED"), True),
        (RuntimeError("mat1 and mat2 shapes cannot be multiplied"), False),
        (ValueError("out of memory"), False),  # only allocator errors count
    ],
)
def test_is_oom(exc: BaseException, expected: bool) -> None:
    assert is_oom(exc) is expected


def test_one_line_keeps_type_and_first_line() -> None:
    assert one_line(ValueError("bad shape\nmore detail")) == "ValueError: bad shape"
    assert one_line(KeyError()) == "KeyError"
    assert len(one_line(RuntimeError("x" * 1000))) == 300
