"""Which ceiling binds a model's rate, from what the device and the host measured by themselves on
the same platform and host: compute, the FLOP/s the model achieved against the fastest matmul
the micro scenario measured in its precision's matmul dtype (a second denominator beside MFU's
datasheet peak); input, the model's items/s against the loader scenario's for the same workload,
batch, data and loader workers.

A ceiling binds when the model reaches BINDS of it; when none does, the rate is held by neither
(kernel efficiency, host overhead, synchronisation: the profiler's questions). Memory bandwidth
(micro/triad) is not attributed: no byte count per step is kept to set against it; nor is a
multi-device run's communication share, which needs a trace.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench import scenarios
from accelbench.records.precision import PRECISIONS
from accelbench.records.result import Result
from accelbench.scenarios.base import record_of
from accelbench.scenarios.micro import MicroMetrics

BINDS = 0.8
"""The share of a ceiling from which it is said to bind."""


@dataclass(frozen=True)
class Ceiling:
    name: str
    """compute or input."""
    share: float
    """The model's reach: its rate over the ceiling."""
    evidence: str


@dataclass(frozen=True)
class Roof:
    result: Result
    ceilings: list[Ceiling]

    @property
    def nearest(self) -> Ceiling | None:
        """The ceiling the model comes closest to."""
        return max(self.ceilings, key=lambda c: c.share, default=None)

    @property
    def binding(self) -> Ceiling | None:
        nearest = self.nearest
        return nearest if nearest is not None and nearest.share >= BINDS else None


def matmul_precision(precision: str) -> str:
    """The micro scenario's precision whose matmul bounds a model run in `precision`."""
    info = PRECISIONS[precision]
    dtype = info.autocast_dtype or info.param_dtype
    return {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, "tf32" if info.tf32 else "fp32")


def roofs(results: Sequence[Result]) -> list[Roof]:
    """Each measured model result with the ceilings measured on its platform and host."""
    peaks: dict[tuple[str, str, str], list[Result]] = defaultdict(list)
    loaders: dict[tuple[object, ...], list[Result]] = defaultdict(list)
    models = []
    for r in results:
        if r.status != "ok" or r.headline is None:
            continue
        where = (r.platform, r.env.hostname)
        if r.spec.workload == "micro/matmul":
            peaks[(*where, r.spec.precision)].append(r)
        elif r.spec.scenario == "loader":
            loaders[(*where, *_feed(r))].append(r)
        elif (
            not (scenario := scenarios.get(r.spec.scenario)).device_only and scenario.rated_by_steps
        ):
            models.append(r)
    found = []
    for r in models:
        where = (r.platform, r.env.hostname)
        ceilings = []
        peak = peaks.get((*where, matmul_precision(r.spec.precision)))
        flops = r.metrics.flops if r.metrics else None
        if peak and flops is not None and r.items_per_s:
            best = max(peak, key=lambda p: p.items_per_s or 0.0)
            achieved = r.items_per_s * flops.per_item / flops.num_devices / 1e12
            tflops = best.items_per_s or 0.0
            micro = record_of(best, MicroMetrics)
            shape = micro.shape if micro else ""
            ceilings.append(
                Ceiling(
                    "compute",
                    achieved / tflops,
                    f"{achieved:.3g} of {tflops:.3g} TFLOP/s per device, the fastest matmul "
                    f"measured here ({shape})",
                )
            )
        drawn = loaders.get((*where, *_feed(r)))
        if drawn and r.items_per_s:
            ceiling = statistics.median(d.items_per_s or 0.0 for d in drawn)
            ceilings.append(
                Ceiling(
                    "input",
                    r.items_per_s / r.spec.num_processes / ceiling,
                    f"{r.items_per_s / r.spec.num_processes:,.0f} of {ceiling:,.0f} items/s a "
                    f"process, its loader alone ({len(drawn)} run(s))",
                )
            )
        found.append(Roof(r, ceilings))
    return found


def _feed(result: Result) -> tuple[object, ...]:
    """What decides a loader's rate: the workload, its args, the batch, the data, the workers."""
    spec = result.spec
    workers = result.metrics.loader_workers if result.metrics else None
    args = tuple(sorted(spec.model_args.items()))
    return spec.workload, args, spec.batch_size, spec.data, workers
