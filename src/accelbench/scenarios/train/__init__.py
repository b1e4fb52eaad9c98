"""The training scenario: epochs of optimizer steps on host data (or a few batches kept on the
device, with inputs_on_device), timed per step; its headline is the delivered rate over the
steady state (measure.py)."""

from accelbench.scenarios.base import Export, Scenario

MLLOG = Export(
    "mllog",
    "accelbench.scenarios.train.exports:write",
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
