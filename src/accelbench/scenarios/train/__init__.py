"""The training scenario: epochs of optimizer steps on host data (or a few batches kept on the
device, with inputs_on_device), timed per step; its headline is the delivered rate over the
steady state (measure.py)."""

from accelbench.scenarios.base import Scenario

SCENARIO = Scenario(
    name="train",
    summary="optimizer steps",
    measure="accelbench.scenarios.train.measure:measure",
    trains=True,
    distributes=True,
    objectives=("throughput", "energy", "cost", "projection"),
    views=frozenset(
        {"batch", "scaling", "first-epoch", "efficiency", "table-1", "table-3", "projection"}
    ),
)
