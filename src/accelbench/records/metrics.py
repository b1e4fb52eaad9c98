"""What a cell measured: its steps and epochs, the steady state's delivered rate, FLOPs, energy,
the host's other work, every rank's figures, and its scenario's own record."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from accelbench import scenarios
from accelbench.records import throughput
from accelbench.records.contention import HostActivity
from accelbench.records.energy import EnergyMetrics
from accelbench.records.frozen import Frozen
from accelbench.records.stats import Summary
from accelbench.scenarios import Record

SCENARIO_FIELDS = {
    "server": "server",
    "serve": "serve",
    "generate": "generate",
    "time-to-train": "time_to_train",
}
"""The fields that held a scenario's record before Metrics.record, by its kind."""
R = TypeVar("R", bound=Record)

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
    active_share: float | None = None
    """A mixture of experts: the share of its expert weights a token runs through, by which
    analytic_per_item counts them (the MFU of active parameters); None for a dense model."""


class RankMetrics(Frozen):
    """One data-parallel replica's own view of the steady state."""

    rank: int
    hostname: str
    local_rank: int
    numa_node: int | None
    """The NUMA node this rank's CPUs belong to; None if they span several."""
    items_per_s: float
    """This rank's items per second over the headline's steady steps (first_steady_step on),
    each with its share of its own epoch's wall clock, as the headline counts them."""
    step_ms_median: float
    input_wait_frac: float
    peak_mem_allocated_gib: float | None
    peak_mem_reserved_gib: float | None = None
    state_gib: float | None = None
    """Weights and optimizer state this rank held: its shards under FSDP and tensor parallel."""
    host_peak_rss_gib: float
    first_steady_step: int | None = None
    """The headline's steady window's first step, over which items_per_s is taken (None: from
    an accelbench that took each rank's own, epoch boundaries left out)."""


class Metrics(Frozen):
    """What a cell measured, step by step, and its scenario's own record. A step is an
    optimizer step when training, and one batch answered when inferring (spec.scenario), whose
    step times are then latencies."""

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
    loader_workers: int | None = None
    """The DataLoader worker processes each rank had (spec.loader_workers(): what --workers
    auto chose); None in records made before it was kept."""
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
    trainable_params: int | None = None
    """Weights the optimizer stepped: all of them, or a LoRA run's adapters; None where no
    optimizer ran, and in older records."""
    expert_load: list[float] | None = None
    """A mixture of experts' router balance: per MoE layer, the busiest expert's tokens over an
    even share (1.0: even), as rank 0's routers sent one micro-batch after the timed steps;
    None for a dense model, a pipeline, and in older records."""
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
    record: SerializeAsAny[Record] | None = None
    """The scenario's own part (the server's rates, serve's trials, generate's token timings,
    time to train's outcome), of the class its `kind` names (scenarios.record_type)."""
    torch_settings: dict[str, str] = Field(default_factory=dict)
    """Every process-wide torch setting that changes speed or numbers, as the run left them
    (precision.global_settings): peers set them silently; empty in older records."""
    ranks: list[RankMetrics] = Field(default_factory=list)
    """Per-replica figures of a data-parallel run, in rank order (empty for one replica). The
    run's own step, epoch and wait times are its slowest rank's (the one whose epochs took
    longest), as the replicas wait for it."""

    @field_validator("record", mode="before")
    @classmethod
    def _record_of_its_kind(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return scenarios.record_type(str(data.get("kind"))).model_validate(data)
        return data

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """Records stored before the scenario's record was one field (it was one of four, each
        named after its scenario), and before the delivered rate was (computed from their raw
        times)."""
        if not isinstance(data, dict):
            return data
        for kind, old in SCENARIO_FIELDS.items():
            if (found := data.get(old, ...)) is not ...:
                data = {k: v for k, v in data.items() if k != old}
                if found is not None:
                    data["record"] = found | {"kind": kind} if isinstance(found, dict) else found
        if "delivered" not in data and data.get("epochs"):
            try:  # an older record: its rate from its steps
                wall = throughput.wall_ms(
                    data["step_ms"],
                    [e["time_s"] for e in data["epochs"]],
                    data["epochs"][0]["num_steps"],
                )
                steady = wall[data["steady_from_step"] :]
                rate = throughput.delivered(steady, data["items_per_step"])
            except (KeyError, TypeError, IndexError, ValueError, ZeroDivisionError) as exc:
                raise ValueError(f"no rate and no whole steps to take it from ({exc!r})") from None
            data = data | {"delivered": rate}
        return data

    def of(self, kind: type[R]) -> R | None:
        """The scenario's record if it is of this class, else None."""
        return self.record if isinstance(self.record, kind) else None

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
