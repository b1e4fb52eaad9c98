"""Which ceiling binds a model's rate, from what the device and the host measured by themselves on
the same platform and host:
- compute: the FLOP/s the model achieved against the fastest matmul the micro scenario measured
  in its precision's matmul dtype (a second denominator beside MFU's datasheet peak);
- memory: a training step's least memory traffic, the optimizer reading and writing every weight
  and optimizer state once (the rank holding most's state_gib, twice), at the bandwidth
  micro/triad measured, as a share of the steady step (a floor: the forward's and backward's
  reads of the weights, the gradients and the activations come on top);
- communication: a data-parallel (DDP) step's gradient all-reduce, its bytes (the trainable
  weights in their dtype) times the ring's 2(n-1)/n, at the bus bandwidth micro/all_reduce
  measured over as many ranks and nodes at the message size nearest DDP's 25 MiB bucket, as a
  share of the steady step, as if nothing overlapped it with the backward;
- input: the model's items/s against the loader scenario's for the same workload, batch, data
  and loader workers.

A ceiling binds when the model reaches BINDS of it; when none does, the rate is held by neither
(kernel efficiency, host overhead, synchronisation: the profiler's questions). Inference keeps
no byte count of its weights, so its memory ceiling is not drawn; nor is communication under
FSDP, tensor or pipeline parallelism, whose collectives are not one all-reduce.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from accelbench import scenarios
from accelbench.records.precision import PRECISIONS
from accelbench.records.result import Result
from accelbench.scenarios.base import series

CEILINGS = ("micro/matmul", "micro/triad", "micro/all_reduce")
"""The micro results that bound a model's rate (with the loader scenario's)."""
BINDS = 0.8
"""The share of a ceiling from which it is said to bind."""


@dataclass(frozen=True)
class Ceiling:
    name: str
    """compute, memory, communication or input."""
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
    micro: dict[tuple[object, ...], list[Result]] = defaultdict(list)
    loaders: dict[tuple[object, ...], list[Result]] = defaultdict(list)
    models, inputs = [], scenarios.in_view("input-ceiling")
    for r in results:
        if r.status != "ok" or r.headline is None:
            continue
        if r.spec.workload in CEILINGS:
            micro[_key(r, r.spec.workload, r.spec.precision)].append(r)
        elif r.spec.scenario in inputs:
            loaders[(r.platform, r.env.hostname, *_feed(r))].append(r)
        elif (
            not isinstance(scenario := scenarios.get(r.spec.scenario), scenarios.DeviceScenario)
            and scenario.rated_by_steps
        ):
            models.append(r)
    found = []
    for r in models:
        ceilings = [
            c
            for c in (
                _compute(r, micro[_key(r, "micro/matmul", matmul_precision(r.spec.precision))]),
                _memory(r, micro[_key(r, "micro/triad", "")]),
                _communication(r, micro[_key(r, "micro/all_reduce", "")]),
                _input(r, loaders[(r.platform, r.env.hostname, *_feed(r))]),
            )
            if c is not None
        ]
        found.append(Roof(r, ceilings))
    return found


def _key(r: Result, workload: str, precision: str) -> tuple[object, ...]:
    """What a micro result of `workload` shares with the results it bounds: the platform and
    host; a matmul, its dtype (`precision`); an all-reduce, its ranks and nodes; a triad, nothing
    more (bandwidth is any dtype's)."""
    spec = r.spec
    own = {"micro/matmul": (precision,), "micro/all_reduce": (spec.replicas, spec.nodes)}
    return (r.platform, r.env.hostname, workload, *own.get(workload, ()))


def _compute(r: Result, peak: Sequence[Result]) -> Ceiling | None:
    flops = r.metrics.flops if r.metrics else None
    if not peak or flops is None or not r.items_per_s:
        return None
    best = max(peak, key=lambda p: p.items_per_s or 0.0)
    achieved = r.items_per_s * flops.per_item / flops.num_devices / 1e12
    tflops = best.items_per_s or 0.0
    call = series(best, "call")
    shape = call.label if call else ""
    return Ceiling(
        "compute",
        achieved / tflops,
        f"{achieved:.3g} of {tflops:.3g} TFLOP/s per device, the fastest matmul measured here "
        f"({shape})",
    )


def _memory(r: Result, triads: Sequence[Result]) -> Ceiling | None:
    m = r.metrics
    if not triads or m is None or not m.state_gib or not m.step_ms_steady.median:
        return None
    gb_per_s = max(t.items_per_s or 0.0 for t in triads)
    traffic = 2 * m.state_gib * 2**30  # read and written once by the optimizer
    floor_ms = 1e3 * traffic / (gb_per_s * 1e9)
    step_ms = m.step_ms_steady.median
    return Ceiling(
        "memory",
        floor_ms / step_ms,
        f"at least {traffic / 1e9:.3g} GB a step (the optimizer reads and writes "
        f"{m.state_gib:.3g} GiB of weights and state) at {gb_per_s:,.4g} GB/s, the triad "
        f"measured here: {floor_ms:.3g} of {step_ms:.3g} ms a step",
    )


def _input(r: Result, drawn: Sequence[Result]) -> Ceiling | None:
    if not drawn or not r.items_per_s:
        return None
    ceiling = statistics.median(d.items_per_s or 0.0 for d in drawn)
    per_process = r.items_per_s / r.spec.num_processes
    return Ceiling(
        "input",
        per_process / ceiling,
        f"{per_process:,.0f} of {ceiling:,.0f} items/s a process, its loader alone "
        f"({len(drawn)} run(s))",
    )


DDP_BUCKET_BYTES = 25 * 2**20
"""DistributedDataParallel's default bucket (bucket_cap_mb=25): the size its all-reduces run at."""


def _communication(r: Result, reduces: Sequence[Result]) -> Ceiling | None:
    m, spec = r.metrics, r.spec
    data_parallel = not (spec.fsdp or spec.tensor_parallel > 1 or spec.pipeline_stages > 1)
    if (
        not reduces
        or m is None
        or not m.trainable_params
        or spec.replicas < 2
        or not data_parallel
        or not m.step_ms_steady.median
    ):
        return None
    grad_bytes = m.trainable_params * _BYTES[PRECISIONS[spec.precision].param_dtype]
    message = min(grad_bytes, DDP_BUCKET_BYTES)

    def distance(reduce: Result) -> float:
        size = series(reduce, "message")
        return abs(math.log((size.value if size else 1.0) / message))

    nearest = min(reduces, key=distance)
    size = series(nearest, "message")
    bus_gb_per_s = nearest.items_per_s or 0.0
    if size is None or not bus_gb_per_s:
        return None
    n = spec.replicas
    comm_ms = 1e3 * grad_bytes * 2 * (n - 1) / n / (bus_gb_per_s * 1e9)
    step_ms = m.step_ms_steady.median
    return Ceiling(
        "communication",
        comm_ms / step_ms,
        f"{grad_bytes / 1e6:,.4g} MB of gradients all-reduced over {n} ranks at {bus_gb_per_s:,.4g} "
        f"GB/s bus bandwidth (micro/all_reduce of {size.value / 2**20:,.4g} MiB, "
        f"nearest DDP's bucket): {comm_ms:.3g} of {step_ms:.3g} ms a step, if nothing "
        "overlapped it",
    )


_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _feed(result: Result) -> tuple[object, ...]:
    """What decides a loader's rate: the workload, its args, the batch, the data, the workers."""
    spec = result.spec
    workers = result.metrics.loader_workers if result.metrics else None
    args = tuple(sorted(spec.model_args.items()))
    return spec.workload, args, spec.batch_size, spec.data, workers
