"""The result record: one per cell, with its spec and environment inside, failed cells too."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from accelbench import throughput
from accelbench.contention import HostActivity
from accelbench.energy import EnergyMetrics
from accelbench.environment import Environment
from accelbench.frozen import Frozen
from accelbench.scenario_records import GenerateMetrics, ServeMetrics, ServerMetrics, TimeToTrain
from accelbench.spec import RunSpec, stable_hash
from accelbench.stats import Summary

Status = Literal["ok", "diverged", "not-converged", "oom", "error", "timeout", "interrupted"]
"""ok: measured; diverged: measured, but the loss became NaN or infinite (or, in time-to-train,
ran away), so the throughput is not a valid result; not-converged: time-to-train measured, but the
budget ended before the target; oom: out of memory; error: the cell failed (see reason);
timeout: killed after its time limit; interrupted: stopped by SIGTERM or Ctrl-C (a sweep run
again runs it again)."""
MEASURED: tuple[Status, ...] = ("ok", "diverged", "not-converged")
"""Statuses whose result holds metrics."""

NO_CPU_PEAK = (
    "none: a CPU's peak depends on its clocks, vector units and threads, and one measured per "
    "cell varied 3x, so no CPU MFU is given"
)


class EpochMetrics(Frozen):
    index: int
    num_steps: int
    num_items: int
    time_s: float
    """Wall time of the epoch, from its first batch request to the device finishing its last step."""
    items_per_s: float
    loss_last: float | None
    loss_mean: float | None
    """None where the scenario computes no loss (serve)."""


class Flops(Frozen):
    per_item: float
    """FLOPs of one item in the scenario's pass (forward and backward when training, forward
    when inferring), counted once by torch's FlopCounterMode on a real micro-batch (matmuls,
    convolutions and attention; elementwise work is not counted), with fused fast paths that
    the counter cannot see turned off."""
    floor_per_item: float | None = None
    """The fewest FLOPs the pass can take (efficiency.flops_floor): 2 per weight of every
    linear, convolution, attention and recurrent layer per item, x2 when training (forward and
    the weights' gradients). A count far below it missed work (validity.IMPLAUSIBLE_BELOW_FLOOR)."""
    peak_per_s: float | None
    """The device's dense peak in the run's precision; None where no peak can be trusted (a
    CPU's depends on its clocks and threads, and one measured per cell varied 3x)."""
    peak_source: str
    """"datasheet: <link>", "measured: <how>" for an accelerator not in efficiency.PEAKS, or
    why there is none."""
    num_devices: int = 1
    """Devices the run used (its replicas); MFU divides by this many peaks."""
    analytic_per_item: float | None = None
    """FLOPs of one item by the workload's published formula (Workload.analytic_flops: for
    transformers, 6 per weight per token plus attention, as torchtitan counts), set beside the
    counted ones; None where the workload has none. Under tensor parallelism the counter sees
    attention on its own device's heads only, and counts low by the others' share."""


class RankMetrics(Frozen):
    """One data-parallel replica's own view of the steady state."""

    rank: int
    hostname: str
    local_rank: int
    numa_node: int | None
    """The NUMA node this rank's CPUs belong to; None if they span several."""
    items_per_s: float
    """This rank's micro batches per second of its own steady step time, in items."""
    step_ms_median: float
    input_wait_frac: float
    peak_mem_allocated_gib: float | None
    peak_mem_reserved_gib: float | None = None
    state_gib: float | None = None
    """Weights and optimizer state this rank held: its shards under FSDP and tensor parallel."""
    host_peak_rss_gib: float


class TrainMetrics(Frozen):
    """What a cell measured, step by step. A step is an optimizer step when training, and one
    batch answered when inferring (spec.scenario), whose step times are then latencies."""

    item_unit: str
    items_per_step: int
    """Global batch: micro batch x accumulation x replicas."""
    tokens_per_item: int | None = None
    """Tokens in one item of a language model (its sequence length), for tokens/s; None
    for other models."""
    layout: str = "none"
    """How the model was spread over the devices (sharding.layout): 'ddp 4', 'fsdp over 2 x
    tp 2'; 'none' on one device."""
    timer: Literal["device-events", "wall-clock"]
    """How step times were taken: device events on the stream, or the host clock on the CPU."""
    epochs: list[EpochMetrics]
    step_ms: list[float]
    """Raw time of every optimizer step, all epochs in order."""
    loss: list[float]
    """Raw loss of every optimizer step (NaN and infinity kept as they were); empty where the
    scenario computes none (serve)."""
    steady_from_step: int
    """Index of the first step counted as steady state: the start of epoch 2 (step 1 of a
    one-epoch run), less any warm-up the detector finds after it. Steps before it hold
    compilation and warm-up."""
    step_ms_steady: Summary
    delivered: throughput.Delivered
    """The headline: items over seconds across the steady state, everything between steps
    included, with its batch-means interval (records made before it are upgraded from their
    step and epoch times)."""
    window_items_per_s: Summary
    """Secondary: throughput of consecutive windows of spec.window_steps steady steps, each
    step timed from the previous one's end (epoch boundaries left out). Its median is the
    typical window, stalls left out, so it can lie above the delivered rate; its quartiles show
    the spread."""
    ci_met: bool | None = None
    """Whether the delivered rate's 95% interval reached spec.ci_pct (None: no target)."""
    input_wait_ms: list[float] = Field(default_factory=list)
    """Raw host time each optimizer step waited for its batches from the loader."""
    input_wait_frac: float | None = None
    """Share of steady-state step time spent waiting for input (None in records made before it
    was measured). Near 0: the device is the limit; large: the host's input pipeline is."""
    compute_items_per_s: float | None = None
    """The delivered rate with the input wait taken out of its time, an estimate of what the
    device could do with input for free (NVIDIA DeepLearningExamples' compute_ips); never below
    the delivered rate."""
    first_step_ms: float
    """Time to the end of the first step, compilation and the first batch included."""
    diverged_at_step: int | None
    peak_mem_allocated_gib: float | None
    peak_mem_reserved_gib: float | None
    state_gib: float | None = None
    """Weights and optimizer state held by the rank holding most (sharding.state_gib): what
    FSDP and tensor parallelism divide; None in older records."""
    host_peak_rss_gib: float
    build_s: float
    """Model, optimizer and data set up before the first step."""
    measure_s: float
    """All epochs, end to end."""
    energy: EnergyMetrics | None = None
    """Energy over the steady epochs (all of a one-epoch run), and how it was measured."""
    joules_per_item: float | None = None
    flops: Flops | None = None
    host: HostActivity | None = None
    """What else the host (and GPU) did during the steady state; None in older records."""
    server: ServerMetrics | None = None
    """The server scenario's rates, after the back-to-back batches above measured capacity."""
    serve: ServeMetrics | None = None
    """The serve scenario's trials; its steps above are batch_size requests ended by the
    closed loop, its items requests."""
    generate: GenerateMetrics | None = None
    """The generate scenario's token timings; its steps above are whole generate calls, its
    items the batch's sequences and tokens_per_item their new tokens (so tokens/s is output
    tokens/s), and its losses the model's on its prompts (generation computes none)."""
    time_to_train: TimeToTrain | None = None
    """The time-to-train scenario's outcome; its epochs above are the intervals between
    evaluations."""
    torch_settings: dict[str, str] = Field(default_factory=dict)
    """Every process-wide torch setting that changes speed or numbers, as the run left them
    (precision.global_settings): peers set them silently; empty in older records."""
    ranks: list[RankMetrics] = Field(default_factory=list)
    """Per-replica figures of a data-parallel run, in rank order (empty for one replica). The
    run's own step, epoch and wait times are its slowest rank's (the one whose epochs took
    longest), as the replicas wait for it."""

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """Records stored before the delivered rate was: compute it from their raw times."""
        if isinstance(data, dict) and "delivered" not in data and data.get("epochs"):
            wall = throughput.wall_ms(
                data["step_ms"],
                [e["time_s"] for e in data["epochs"]],
                data["epochs"][0]["num_steps"],
            )
            steady = wall[data["steady_from_step"] :]
            data = data | {"delivered": throughput.delivered(steady, data["items_per_step"])}
        return data

    @property
    def items_per_s(self) -> float:
        """Steady-state throughput: the delivered rate."""
        return self.delivered.items_per_s

    @property
    def flops_per_s(self) -> float | None:
        """Achieved model FLOP/s at the steady-state throughput, over all replicas."""
        return self.flops.per_item * self.items_per_s if self.flops else None

    @property
    def tokens_per_s(self) -> float | None:
        """Steady-state throughput in tokens, for language models."""
        return self.items_per_s * self.tokens_per_item if self.tokens_per_item else None

    @property
    def mfu(self) -> float | None:
        """Model FLOP utilisation: achieved over the peak FLOP/s of all devices used (see
        flops.peak_source); None without a trusted peak."""
        return self._utilisation(self.flops.per_item if self.flops else None)

    @property
    def mfu_analytic(self) -> float | None:
        """MFU from the analytic FLOP count (Flops.analytic_per_item), as torchtitan reports it."""
        return self._utilisation(self.flops.analytic_per_item if self.flops else None)

    @property
    def tflops_per_device(self) -> float | None:
        """Achieved TFLOP/s per device by the analytic count, else the counted one: a figure
        that needs no peak (MFU means little in float8, whose peak counts differently)."""
        f = self.flops
        per_item = f and (f.analytic_per_item or f.per_item)
        return per_item * self.items_per_s / f.num_devices / 1e12 if f and per_item else None

    def _utilisation(self, per_item: float | None) -> float | None:
        if per_item is None or self.flops is None or self.flops.peak_per_s is None:
            return None
        return per_item * self.items_per_s / (self.flops.peak_per_s * self.flops.num_devices)


class Result(Frozen):
    key: str
    """Stable hash of spec and platform fingerprint: the same cell on the same platform."""
    spec: RunSpec
    env: Environment
    status: Status
    reason: str | None = None
    """One line saying why, for any status but ok."""
    detail: str | None = None
    """The end of the traceback or of the child's output, for failures."""
    metrics: TrainMetrics | None = None
    created_at: datetime
    wall_s: float | None = None
    """The whole cell as its launcher saw it: process start, imports, set-up and measurement."""
    argv: list[str] | None = None
    """The command line of the sweep that ran the cell (None: made in this process, or before
    it was kept)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """The user's labels of the run (--tag KEY=VALUE: a job id, a ticket, a node name): kept
    and exported, never part of the key."""
    log_path: str | None = None
    """The cell's own output (its prints, torch's and NCCL's warnings), kept in the log
    directory (connect.log_dir); None: made in this process, or before logs were kept."""

    @field_validator("created_at")
    @classmethod
    def _aware(cls, when: datetime) -> datetime:
        """A time without a zone (an imported record) is taken as UTC, as accelbench writes
        them: times are compared and sorted across records."""
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)

    @classmethod
    def new(
        cls,
        spec: RunSpec,
        env: Environment,
        status: Status,
        *,
        reason: str | None = None,
        detail: str | None = None,
        metrics: TrainMetrics | None = None,
    ) -> Result:
        """A result made now, keyed by its spec and platform."""
        return cls(
            key=result_key(spec, env),
            spec=spec,
            env=env,
            status=status,
            reason=reason,
            detail=detail,
            metrics=metrics,
            created_at=datetime.now(UTC),
        )

    @property
    def platform(self) -> str:
        """What the numbers are of: the centre's label (spec.platform: a cluster or partition)
        with the device model, "jureca-dc (NVIDIA A100-SXM4-40GB)", else the device model alone
        (as every record made before labels reads); for serve, which measures a server from its
        client, the server's platform as the user named it, else its endpoint (the client's
        host stays in env)."""
        if self.spec.scenario == "serve":
            return self.spec.platform or f"server at {self.spec.endpoint}"
        label = self.spec.platform
        return f"{label} ({self.env.platform})" if label else self.env.platform

    @property
    def device_model(self) -> str:
        """The device model alone, without the centre's label: what published figures are
        matched by (for serve: the server's platform, whose devices the client cannot see)."""
        return self.platform if self.spec.scenario == "serve" else self.env.platform

    @property
    def overhead_s(self) -> float | None:
        """Cell time outside the measured epochs (process start, imports, model build)."""
        if self.wall_s is None or self.metrics is None:
            return None
        return self.wall_s - self.metrics.measure_s

    @model_validator(mode="before")
    @classmethod
    def _no_cpu_peak(cls, data: Any) -> Any:
        """Records stored when a CPU's peak was measured per cell: that peak is dropped."""
        if not isinstance(data, dict):
            return data
        env, metrics = data.get("env"), data.get("metrics")
        if not isinstance(env, dict) or env.get("device_type") != "cpu":
            return data
        if not isinstance(metrics, dict) or not isinstance(flops := metrics.get("flops"), dict):
            return data
        if str(flops.get("peak_source")).startswith("measured"):
            update = {"flops": flops | {"peak_per_s": None, "peak_source": NO_CPU_PEAK}}
            data = data | {"metrics": metrics | update}
        return data

    @property
    def items_per_s(self) -> float | None:
        """The headline: the delivered rate across the steady state; for the server scenario,
        the query rate sustained within its bound (None where none was), never its capacity;
        for serve, the goodput at the reported rate (None where no rate met the SLO)."""
        if self.metrics is None:
            return None
        if self.metrics.server is not None:
            return self.metrics.server.sustained_per_s
        if self.metrics.serve is not None:
            return self.metrics.serve.goodput_per_s
        return self.metrics.items_per_s

    @property
    def items_per_s_ci(self) -> tuple[float, float] | None:
        """The headline's 95% interval (None where it has none: too few steady steps, or a
        server's sustained rate, from one trial); a serve goodput's is over its requests
        (ServeMetrics.goodput_ci)."""
        m = self.metrics
        if m is not None and m.serve is not None:
            return m.serve.goodput_ci
        if m is None or m.server is not None:
            return None
        low, high = m.delivered.ci_low, m.delivered.ci_high
        return None if low is None or high is None else (low, high)

    @property
    def num_devices(self) -> int:
        """Devices the cell ran on: replicas x pipeline stages."""
        return self.spec.num_processes


def measured(results: Sequence[Result], *scenarios: str) -> list[Result]:
    """The results of these scenarios that hold metrics."""
    return [
        r for r in results if r.spec.scenario in scenarios and r.status in MEASURED and r.metrics
    ]


def result_key(spec: RunSpec, env: Environment) -> str:
    """The stored record's key: one per cell, repeat and environment."""
    return stable_hash(spec.identity(), env.fingerprint())


ANY_BATCH = ("batch_size", "grad_accum", "seed")
"""cell_key's `ignore` for the same configuration at any micro batch (and accumulation, and
seed): the cells of a batch sweep."""


def cell_key(
    result: Result, *, ignore: Iterable[str] = (), platform: bool = True, **fields: object
) -> str:
    """Which cell a result measured, the one grouping key: its spec without the repeat index
    and the `ignore`d fields, with `fields` replaced, and with `platform`, its environment.
    Repeats of a cell share it; so do a batch sweep's cells with `ignore=("batch_size",)`, and
    a multi-replica cell and its one-replica base with `replicas=1`."""
    cell = result.spec.model_dump(mode="json") | dict.fromkeys(ignore) | fields
    del cell["repeat"]
    return json.dumps([cell, result.env.fingerprint() if platform else None], sort_keys=True)
