"""The inference scenario: forward passes of one batch at a time under inference_mode, each
timed to its answer, copy from the host included (measure.py)."""

from accelbench.scenarios.base import Scenario

SCENARIO = Scenario(
    name="infer",
    summary="forward passes of one batch at a time, each timed to its answer",
    measure="accelbench.scenarios.infer.measure:measure",
    batch_latency=True,
    objectives=("latency",),
    views=frozenset({"batch", "first-epoch", "efficiency", "latency"}),
    notes="accelbench.scenarios.infer.report:latency_lines",
)
