from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from accelbench.spec import RunSpec


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test touches the user's database, and torch's global state is the same for each."""
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "default.sqlite"))
    flags = (
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.cudnn.conv.fp32_precision,
        torch.backends.cudnn.rnn.fp32_precision,
    )
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    yield
    (
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.cudnn.conv.fp32_precision,
        torch.backends.cudnn.rnn.fp32_precision,
    ) = flags
    torch.set_num_threads(threads)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


def tiny(**overrides: object) -> RunSpec:
    """A spec that runs in a fraction of a second on a CPU."""
    fields: dict[str, object] = {
        "workload": "tiny_mlp",
        "batch_size": 4,
        "epochs": 2,
        "steps_per_epoch": 4,
        "window_steps": 1,
        "device": "cpu",
    }
    return RunSpec.model_validate(fields | overrides)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
