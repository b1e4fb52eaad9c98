"""The train plug-in: what the core reads of the training scenario (its MLPerf log export in
exports.py)."""

from accelbench.scenarios.base import Export, Scenario
from accelbench.scenarios.train import exports

MLLOG = Export(
    "mllog",
    exports.write,
    takes="training runs",
    writes="training run(s) as MLPerf logs",
    help="each training run as MLPerf's :::MLLOG lines",
)
"""MLPerf's training logs, of this scenario's runs and time to train's."""

SCENARIO = Scenario(
    name="train",
    summary="optimizer steps",
    measure="accelbench.scenarios.train.measure:measure",
    trains=True,
    distributes=True,
    objectives=("throughput", "energy", "cost", "projection"),
    exports=(MLLOG,),
    views=frozenset(
        {"batch", "scaling", "first-epoch", "efficiency", "table-1", "table-3", "projection"}
    ),
)
