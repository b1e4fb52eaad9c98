"""The micro scenario's measurements (scenarios/micro): a kernel or a copy called `batch_size`
times a step, or a whole multiple of that where a step would be shorter than MIN_STEP_S, each
step timed as a training step is (execution.device.StepTimer)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from accelbench.analysis import references
from accelbench.errors import AccelbenchError
from accelbench.execution import device as dev
from accelbench.execution import efficiency
from accelbench.execution.precision import torch_settings
from accelbench.records.metrics import Metrics
from accelbench.records.spec import RunSpec
from accelbench.scenarios.epochs import Raw, build_metrics, measured_epochs
from accelbench.scenarios.micro import MIN_STEP_S, MicroMetrics

MIB = 1 << 20


class _Calls:
    """The items of a micro cell's steps (epochs.Items): calls."""

    item_unit = "calls"
    tokens_per_item = None


def measure(spec: RunSpec, device: torch.device) -> Metrics:
    start = time.perf_counter()
    dtype = torch_settings(spec.precision).param_dtype  # TF32 set or cleared as it says
    kind = spec.workload.removeprefix("micro/")
    measures = {"matmul": _matmul, "triad": _triad, "copy": _copy}
    call, record = measures.get(kind, _collective)(spec, dtype, device)
    call()  # warm-up outside the epochs: kernel choice, first touch of the buffers
    dev.synchronize(device)
    build_s = time.perf_counter() - start
    calls = calls_per_step(spec.batch_size, _took_s(call, spec.batch_size, device), device)
    record = record.model_copy(update={"calls_per_step": calls})
    spec = spec.model_copy(update={"batch_size": calls})  # the items of a step: its calls
    raw, timer = Raw(), dev.StepTimer(device)
    for _ in measured_epochs(spec, device, raw):
        timer.mark()
        for _ in range(spec.steps_per_epoch):
            for _ in range(calls):
                call()
            timer.mark()
        raw.step_ms += timer.intervals_ms()  # synchronises: the epoch ends with the device
    raw.wait_ms = [0.0] * len(raw.step_ms)
    raw.peak_allocated, raw.peak_reserved = dev.peak_memory_gib(device)
    raw.host_rss = dev.host_peak_rss_gib()
    metrics = build_metrics(
        spec, _Calls(), raw, [], timer=timer.method, build_s=build_s, flops=None
    )
    return metrics.model_copy(update={"record": record})


def calls_per_step(batch_size: int, took_s: float, device: torch.device) -> int:
    """`batch_size` calls, times the rounds of them a step needs to last MIN_STEP_S, given that
    `batch_size` calls took `took_s`; every rank makes the most any rank needs (a collective's
    calls must pair)."""
    rounds = max(1, math.ceil(MIN_STEP_S / max(took_s, 1e-9)))
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        most = torch.tensor([rounds], device=device)
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        rounds = int(most.item())
    return batch_size * rounds


def _took_s(call: Callable[[], object], count: int, device: torch.device) -> float:
    """Seconds that `count` calls take, measured once after the warm-up."""
    start = time.perf_counter()
    for _ in range(count):
        call()
    dev.synchronize(device)
    return time.perf_counter() - start


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _matmul(
    spec: RunSpec, dtype: torch.dtype, device: torch.device
) -> tuple[Callable[[], object], MicroMetrics]:
    args = spec.model_args
    side = 1024 if device.type == "cpu" else 8192
    n = int(args.get("n", side))
    m, k = int(args.get("m", n)), int(args.get("k", n))
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(n, k, device=device, dtype=dtype).t()  # as mamf-finder.py lays it out
    c = torch.empty(m, n, device=device, dtype=dtype)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    peak = efficiency.datasheet_peak(name, spec.precision) if name else None
    record = MicroMetrics(
        measure="matmul",
        shape=f"{m}x{n}x{k} {_name(dtype)}",
        flops_per_call=2.0 * m * n * k,
        datasheet_per_s=peak[0] if peak else None,
        datasheet_source=peak[1] if peak else None,
    )
    return lambda: torch.mm(a, b, out=c), record


def _triad(
    spec: RunSpec, dtype: torch.dtype, device: torch.device
) -> tuple[Callable[[], object], MicroMetrics]:
    args = spec.model_args
    mib = int(args.get("mib", 64 if device.type == "cpu" else 256))
    size = torch.finfo(dtype).bits // 8
    count = mib * MIB // size
    a, b, c = (torch.rand(count, device=device, dtype=dtype) for _ in range(3))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    peak = references.peak_bandwidth(name) if name else None
    record = MicroMetrics(
        measure="triad",
        shape=f"3 x {mib} MiB {_name(dtype)}",
        bytes_per_call=3.0 * count * size,
        datasheet_per_s=peak[0] if peak else None,
        datasheet_source=peak[1] if peak else None,
    )
    return lambda: torch.add(b, c, alpha=3.0, out=a), record


def _copy(
    spec: RunSpec, dtype: torch.dtype, device: torch.device
) -> tuple[Callable[[], object], MicroMetrics]:
    args = spec.model_args
    if device.type == "cpu":
        raise AccelbenchError("micro/copy measures host-device copies: run it on an accelerator")
    mib = int(args.get("mib", 256))
    direction, pageable = args.get("direction", "h2d"), bool(args.get("pageable", False))
    count = mib * MIB // (torch.finfo(dtype).bits // 8)
    host = torch.rand(count, dtype=dtype, pin_memory=not pageable)
    on_device = torch.empty(count, dtype=dtype, device=device)
    record = MicroMetrics(
        measure="copy",
        shape=f"{direction} {mib} MiB {'pageable' if pageable else 'pinned'}",
        bytes_per_call=float(count * host.element_size()),
    )
    if direction == "h2d":
        return lambda: on_device.copy_(host, non_blocking=not pageable), record
    return lambda: host.copy_(on_device, non_blocking=not pageable), record


BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
"""Bus bandwidth over algorithm bandwidth for n ranks, as nccl-tests defines it
(github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): the bandwidth each rank's link needs, to be
set beside the hardware's, whatever the number of ranks."""


def _collective(
    spec: RunSpec, dtype: torch.dtype, device: torch.device
) -> tuple[Callable[[], object], MicroMetrics]:
    """A collective of S = `bytes` over every rank (nccl-tests' S: the whole array; a rank's
    share of an all-gather or reduce-scatter is S/n), in place where asked (all-reduce and
    broadcast always are)."""
    import torch.distributed as dist

    kind = spec.workload.removeprefix("micro/")
    n = dist.get_world_size() if dist.is_initialized() else 1
    if n < 2:
        raise AccelbenchError(f"{spec.workload} needs two ranks or more: give --replicas 2")
    size = torch.finfo(dtype).bits // 8
    count = int(spec.model_args.get("bytes", (4 if device.type == "cpu" else 256) * MIB))
    count = max(n, count // size // n * n)  # whole elements, a whole share per rank
    in_place = bool(spec.model_args.get("in_place", False)) and kind in (
        "all_gather",
        "reduce_scatter",
    )
    whole, other = (torch.rand(count, device=device, dtype=dtype) for _ in range(2))
    share = whole.narrow(0, dist.get_rank() * (count // n), count // n)  # in place: a view
    part = share if in_place else share.clone()
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    calls: dict[str, Callable[[], object]] = {
        "all_reduce": lambda: dist.all_reduce(whole),
        "broadcast": lambda: dist.broadcast(whole, src=0),
        "all_gather": lambda: gather(whole, part),
        "reduce_scatter": lambda: scatter(part, whole),
        "all_to_all": lambda: dist.all_to_all_single(other, whole),
    }
    algorithm_bytes = float(count * size)
    record = MicroMetrics(
        measure=kind,
        shape=f"{algorithm_bytes / MIB:g} MiB {_name(dtype)} over {n} ranks"
        + (", in place" if in_place else ""),
        bytes_per_call=algorithm_bytes * BUS_FACTOR[kind](n) / n,  # a call on each rank
        algorithm_bytes=algorithm_bytes,
        bus_factor=BUS_FACTOR[kind](n),
    )
    return calls[kind], record
