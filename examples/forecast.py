"""A user's model that trains on their own arrays: a forecaster of the next value of a series.

    python examples/forecast.py series/               # writes series/features.npy, targets.npy
    accelbench run examples/forecast.py:build --data series/
    accelbench run examples/forecast.py:build --data series/ --scenario time-to-train \\
        --target 'val_loss<=0.01' --epochs 30

`reads=Arrays(...)` says what one record of real data is: here a window of `window` past values
(features.npy holds one window a row) and the value after it (targets.npy, one number a row).
Synthetic samples for plain benchmarking are random records of that shape.
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from accelbench import Arrays, Workload, reading


def build(window: int = 32, hidden: int = 64) -> Workload:
    """An MLP that reads `window` past values and predicts the next one."""

    def build_model() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(window, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
        )

    def loss(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.mse_loss(model(batch["features"]).squeeze(-1), batch["target"])

    return reading(Arrays(features=(window,)), build_model, loss, "windows")


def write_series(folder: Path, window: int = 32, length: int = 4096, seed: int = 0) -> None:
    """A noisy sine wave cut into windows and their next values, as two .npy files."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(length + window, dtype=np.float32)
    series = np.sin(t / 10) + 0.05 * rng.standard_normal(len(t)).astype(np.float32)
    rows = np.lib.stride_tricks.sliding_window_view(series[:-1], window)[:length]
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "features.npy", rows)
    np.save(folder / "targets.npy", series[window : window + length])


if __name__ == "__main__":
    write_series(Path(sys.argv[1] if len(sys.argv) > 1 else "series"))
