"""accelbench: how AI/ML workloads really perform on the accelerators you can get.

The Python API is what the CLI uses:

    from accelbench import RunSpec, ResultStore, grid, run, run_sweep
    result = run(RunSpec(workload="tiny_mlp", batch_size=32))       # in this process
    store = ResultStore("results.sqlite")
    run_sweep(grid({"batch_size": [8, 32]}, workload="autoencoder"), store)  # a child per cell

Each name is imported at its first use, so that importing one module of the package costs that
module alone: the command line starts its cell server (and its import of torch) before it
imports the rest (accelbench.command).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.cell.runner import run
    from accelbench.orchestration.sweep import grid, run_sweep
    from accelbench.records.result import Result
    from accelbench.records.spec import RunSpec
    from accelbench.report.database import ResultStore
    from accelbench.workload import Arrays, Images, Tokens, Workload, reading

_HOMES = {
    "run": "accelbench.cell.runner",
    "grid": "accelbench.orchestration.sweep",
    "run_sweep": "accelbench.orchestration.sweep",
    "Result": "accelbench.records.result",
    "RunSpec": "accelbench.records.spec",
    "ResultStore": "accelbench.report.database",
    **dict.fromkeys(("Arrays", "Images", "Tokens", "Workload", "reading"), "accelbench.workload"),
}
"""The module each name of the API comes from."""

__all__ = [
    "Arrays",
    "Images",
    "Result",
    "ResultStore",
    "RunSpec",
    "Tokens",
    "Workload",
    "grid",
    "reading",
    "run",
    "run_sweep",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib import metadata

        try:
            version = metadata.version("accelbench")
        except metadata.PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
            version = "0+unknown"
        globals()[name] = version
        return version
    if name not in _HOMES:
        raise AttributeError(f"module 'accelbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value
