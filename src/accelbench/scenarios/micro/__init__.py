"""The micro scenario: the device measured by itself, no model, so that a model that runs below
its published rate can be set beside what the device's arithmetic and memory deliver.

- `micro/matmul` (model args n, m, k; default 8192, 1024 on a CPU): C = A B in the precision's
  dtype, 2 m n k FLOPs a call, in TFLOP/s beside the datasheet's dense peak where the device is
  in efficiency.PEAKS;
- `micro/triad` (mib: each array's MiB, default 256, 64 on a CPU): STREAM's triad a = b + s c,
  three arrays moved a call (two read, one written), as STREAM counts them, in GB/s;
- `micro/copy` (mib, direction h2d or d2h, pageable): a host-device copy of one buffer, pinned
  unless pageable, in GB/s; accelerators only;
- `micro/all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast` (bytes: S, the
  whole array, default 256 MiB, 4 MiB on a CPU; in_place for all-gather and reduce-scatter) over
  --replicas ranks (NCCL on GPUs, gloo on CPUs, through torchrun and Slurm as any cell): the
  headline is the bus bandwidth, algbw = S / t times nccl-tests' correction, 2(n-1)/n for an
  all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast
  (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md), so it can be set beside the links' own.

A step makes `batch_size` calls, or as many rounds of them as make it last 25 ms (MIN_STEP_S:
the steady state is then long enough to judge), and is timed as every cell's steps are (device
events on an accelerator), so the steady rate, its batch-means interval and its verdicts are every cell's;
the headline scales the calls per second by the work of a call, in decimal units (1 TFLOP =
1e12 FLOPs, 1 GB = 1e9 bytes), as STREAM and nccl-tests report.
"""

from __future__ import annotations

from collections.abc import Mapping

from accelbench.scenarios.base import Record, Series

DTYPES = ("fp32", "tf32", "bf16", "fp16")
"""The precisions a kernel runs in: one dtype each, no autocast."""


MIN_STEP_S = 0.025
"""A step's least duration. A step of `batch_size` calls shorter than this makes them again,
as many times as it takes (nvbench's --min-time, timeit's autorange), so the default 20 steady
steps last at least 0.5 s, twice records.contention.MIN_WINDOW_S, below which a steady state is
too short to judge: an H100 made 8 matmuls of 8192^3 in 12 ms and 8 triads of 256 MiB in 2 ms."""


class MicroMetrics(Record):
    kind: str = "micro"
    measure: str
    """What was measured: matmul, triad, copy or a collective (all_reduce, ...)."""
    shape: str
    """The work of a call in words: "8192x8192x8192 bfloat16", "3 x 256 MiB float32"."""
    flops_per_call: float | None = None
    bytes_per_call: float | None = None
    """The bytes of one item of the steps: a call; for a collective, a call on one rank, so its
    bus bytes (S times bus_factor) over the ranks."""
    algorithm_bytes: float | None = None
    """A collective's S, as nccl-tests names it: the whole array's bytes."""
    bus_factor: float | None = None
    """A collective's bus bandwidth over its algorithm bandwidth (nccl-tests' correction)."""
    datasheet_per_s: float | None = None
    """The device's datasheet peak: dense FLOP/s for a matmul (execution.efficiency.PEAKS),
    memory bytes/s for a triad (references.csv); None where none is shipped."""
    datasheet_source: str | None = None
    calls_per_step: int | None = None
    """The calls a step made: --batch-size, or a whole multiple of it where that many took
    less than MIN_STEP_S (None in results from before it was recorded)."""

    @property
    def per_call(self) -> tuple[float, str]:
        """The work of a call in the headline's unit, and the unit."""
        if self.flops_per_call:
            return self.flops_per_call / 1e12, "TFLOP/s"
        return (self.bytes_per_call or 0.0) / 1e9, "GB/s"

    def series(self) -> Mapping[str, Series]:
        work = (self.flops_per_call, "FLOP") if self.flops_per_call else (self.bytes_per_call, "B")
        found = {"call": Series(work[0], work[1], label=self.shape)} if work[0] else {}
        if self.algorithm_bytes:
            found["message"] = Series(self.algorithm_bytes, "B", label=self.shape)
        return found
