"""The infer plug-in: what the core reads of the inference scenario (its latency lines in
report.py)."""

from accelbench.scenarios.base import Scenario
from accelbench.scenarios.infer import report

SCENARIO = Scenario(
    name="infer",
    summary="forward passes of one batch at a time, each timed to its answer",
    measure="accelbench.scenarios.infer.measure:measure",
    batch_latency=True,
    objectives=("latency",),
    views=frozenset({"batch", "first-epoch", "efficiency", "latency"}),
    notes=report.latency_lines,
)
