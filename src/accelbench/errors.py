"""The tool's one exception type, and the one place that recognises running out of memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class AccelbenchError(Exception):
    """A problem the user can fix; the message says how. The CLI shows it as one line, exit 2."""


# Messages of allocators that report exhaustion as a plain RuntimeError rather than a typed error:
# PyTorch's CPU allocator, MPS and XPU backends, and cuDNN/cuBLAS workspace failures.
_OOM_MESSAGES = (
    "out of memory",
    "can't allocate memory",
    "cudnn_status_alloc_failed",
    "cublas_status_alloc_failed",
)


def first_invalid(exc: ValidationError) -> tuple[str, str]:
    """(where, why) of a pydantic error's first problem: its field path, dotted ("" for the
    whole), and its message without pydantic's "Value error, " prefix."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return where, error["msg"].removeprefix("Value error, ")


def is_oom(exc: BaseException) -> bool:
    """True when `exc` means a device or the host ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    if any(cls.__name__ == "OutOfMemoryError" for cls in type(exc).__mro__):
        return True  # torch.OutOfMemoryError, without importing torch here
    return isinstance(exc, RuntimeError) and any(m in str(exc).lower() for m in _OOM_MESSAGES)


EXTRAS = {
    **dict.fromkeys(("torchvision", "timm", "monai", "effdet"), "vision"),
    **dict.fromkeys(("transformers", "tokenizers"), "nlp"),
    "torch_geometric": "graph",
    **dict.fromkeys(("webdataset", "sklearn"), "data"),
    "httpx": "serving",
    "aiohttp": "serving",
    "psycopg": "postgres",
    "torchao": "float8",
    "peft": "finetune",
    **dict.fromkeys(("jax", "jaxlib", "optax"), "jax"),
    **dict.fromkeys(("tensorflow", "keras"), "tensorflow"),
}
"""The extra (pyproject.toml) that installs each optional top-level module."""


def missing_extra(exc: BaseException) -> str | None:
    """For a module an extra provides and that is not installed: the line naming the extra."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    module = exc.name.split(".")[0]
    extra = EXTRAS.get(module)
    return None if extra is None else f"needs {module}: pip install 'accelbench[{extra}]'"


def one_line(exc: BaseException) -> str:
    """The exception as one short line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else ""
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."
