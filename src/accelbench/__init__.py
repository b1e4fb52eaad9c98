"""accelbench: how AI/ML workloads really perform on the accelerators you can get.

The Python API is what the CLI uses:

    from accelbench import RunSpec, ResultStore, grid, run, run_sweep
    result = run(RunSpec(workload="tiny_mlp", batch_size=32))       # in this process
    store = ResultStore("results.sqlite")
    run_sweep(grid({"batch_size": [8, 32]}, workload="autoencoder"), store)  # a child per cell
"""

import importlib.metadata

from accelbench.cell.runner import run
from accelbench.orchestration.sweep import grid, run_sweep
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.database import ResultStore
from accelbench.workload import Arrays, Images, Tokens, Workload, reading

try:
    __version__ = importlib.metadata.version("accelbench")
except importlib.metadata.PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
    __version__ = "0+unknown"

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
