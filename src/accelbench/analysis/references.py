"""Published results shipped with the tool (references.csv), to set runs beside.

Each row is one published figure, copied from its source table with its conditions (platform,
device count, replicas, micro batch, framework) and the accelbench workload it corresponds to.
Contents: the four tables of the PEARC '22 study (seed 003); every training, inference and
MLPerf v2.0 row of Graphcore's results page (seed 002, transcribed by
scripts/seed_002_references.py); the headline ratios of Graphcore's IPU-M2000 page (seed 001)
as claims, unit "x"; NVIDIA's DGX A100 ResNet-50 training figures from DeepLearningExamples; and
torchtitan's Llama 3.1 8B FSDP training on H100s, in tokens/s per GPU (its Float8 rows are left
out: accelbench does not train in float8); the device's own: the Maximum Achievable Matmul FLOPS
(a measured BF16 matmul at its best shape) and the datasheet memory bandwidth of A100, H100 and
H200 SXM, from Bekman's Machine Learning Engineering Open Book; Megatron-Bridge's DGX-H100
GPT-OSS 120B pre-training figure, in tokens/s per GPU; and MLPerf Inference's Llama 2 70B (v4.1
log summaries, v6.1 summary.csv) and GPT-OSS 120B (v6.1) serving rates, in tokens/s per system.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources

from pydantic import Field, field_validator

from accelbench import scenarios, workloads
from accelbench.analysis import validity
from accelbench.records.frozen import Frozen
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.scenarios.base import ClientScenario, DeviceScenario, series

PUBLISHED_PRECISIONS = {
    "16.16": "fp16",  # Graphcore: fp16 weights and activations, fp16 arithmetic
    "16.32": "amp-fp16",  # fp16 activations, fp32 master weights and accumulation
    "32.32": "fp32",
    "AMP": "amp-fp16",  # NVIDIA's automatic mixed precision
    "mixed precision": "amp-fp16",
    "TF32": "tf32",
    "FP32": "fp32",
    "Float8": "fp8",  # torchtitan: torchao's float8 training of the Linear layers
    "BF16": "bf16",  # a kernel's inputs (MAMF's matmuls)
}
"""Precision notations as vendors publish them, and the accelbench precision of each."""


class Reference(Frozen):
    source: str
    table: str
    model: str
    """The model as the source names it."""
    workload: str | None
    """The accelbench workload that runs the same model, if any."""
    platform: str
    num_devices: int
    replicas: int | None
    instances: int | None
    micro_batch: int | None
    framework: str
    precision_published: str | None
    """The precision as the source writes it, when it gives one."""
    metric: str
    value: float
    unit: str
    note: str | None
    variant: str | None = None
    """The source's variant column (task, sequence length, configuration)."""
    sdk: str | None = None
    dataset: str | None = None
    global_batch: int | None = None
    scenario: str = "train"
    """The registered scenario that measures as the source did."""
    model_args: dict[str, int] = Field(default_factory=dict)
    """Shape arguments that make the workload run the published shape (e.g. seq_len 128)."""

    @property
    def in_tokens(self) -> bool:
        """A language model's figure in tokens, not in the workload's items (sequences)."""
        return self.unit.startswith("tokens/s")

    @property
    def per_device(self) -> bool:
        """The figure is published per device (torchtitan's TPS/GPU), not for all of them."""
        return self.unit.endswith("per GPU")

    @property
    def compiled(self) -> bool:
        """The published run used torch.compile, as its variant says."""
        return "torch.compile" in (self.variant or "")

    @property
    def precision(self) -> str | None:
        """The accelbench precision that computes as the published one, where there is one."""
        return PUBLISHED_PRECISIONS.get(self.precision_published or "")

    @field_validator("model_args", mode="before")
    @classmethod
    def _json(cls, text: object) -> object:
        return json.loads(text) if isinstance(text, str) else text or {}

    @field_validator("workload")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        return None if name is None else workloads.check_name(name)

    @field_validator("scenario")
    @classmethod
    def _registered(cls, name: str) -> str:
        return scenarios.get(name).name  # ValueError naming the registered ones


FORMS = ("sxm", "pcie")
"""Form factors a device name may give (torch: "NVIDIA A100-PCIE-40GB"), whose peaks differ."""
PEAK_BANDWIDTH = "peak memory bandwidth"
"""The metric of a device's datasheet memory bandwidth (its unit TB/s)."""


def peak_bandwidth(device_name: str) -> tuple[float, str] | None:
    """(bytes/s, source) of the device's datasheet memory bandwidth, for a memory measurement
    to be set beside; None where none is shipped. Matched by family and form factor (SXM,
    PCIe) where the name gives one."""
    run = family(device_name)
    for r in load():
        same_form = all(f in r.platform.lower() or f not in device_name.lower() for f in FORMS)
        if r.metric == PEAK_BANDWIDTH and family(r.platform) == run and run and same_form:
            return r.value * 1e12, f"{r.platform}, {r.source}"
    return None


@cache
def load() -> tuple[Reference, ...]:
    """Every shipped reference, in file order."""
    text = resources.files("accelbench.analysis").joinpath("references.csv").read_text()
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    return tuple(
        Reference.model_validate({k: (v or None) for k, v in row.items()})
        for row in csv.DictReader(lines)
    )


def query(
    workload: str | None = None, platform: str | None = None, table: str | None = None
) -> list[Reference]:
    """References of this workload, on platforms whose name contains `platform`, from tables
    whose name contains `table`."""
    return [
        r
        for r in load()
        if (workload is None or r.workload == workload)
        and (platform is None or platform.lower() in r.platform.lower())
        and (table is None or table.lower() in r.table.lower())
    ]


FAMILIES = {
    "A100": r"A100",
    "H100": r"H100",
    "H200": r"H200",
    "B200": r"\bB200\b",  # not GB200: a Grace superchip's figures are its own
    "B300": r"\bB300\b",
    "V100": r"V100",
    "MI300X": r"MI300X",
    "MI355X": r"MI355X",
    "Bow IPU": r"\bBow\b",
    "Mk2 IPU": r"IPU-POD|IPU-M2000|Mk2|GC200",
}
"""Device families, by a pattern of their names as torch and the sources write them: a run is
set beside references of its own family."""
THROUGHPUT_METRICS = ("throughput", "throughput, epoch 2")
"""Steady-state throughput as the sources name it (seed 003's Table 1 gives both epochs)."""
DEFAULT_TOLERANCE_PCT = 10.0


def family(platform: str) -> str | None:
    return next((name for name, rx in FAMILIES.items() if re.search(rx, platform)), None)


class Agreement(StrEnum):
    AGREES = "agrees"
    BELOW = "below-reference"
    ABOVE = "above-reference"


@dataclass(frozen=True)
class Match:
    """A stored run set beside the closest published throughput of its workload and family."""

    result: Result
    reference: Reference
    measured: float
    published: float
    per_device: bool
    """Both figures are per device (derived), as the device counts differ."""
    differences: tuple[str, ...]
    """How the run's conditions differ from the published ones."""
    devices: int
    """The devices the run's figure is of (for serve: the server's GPUs)."""

    @property
    def ratio(self) -> float:
        return self.measured / self.published

    def verdict(self, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> tuple[Agreement, list[str]]:
        """(agreement, likely causes): within +-tolerance of the published figure, or outside it
        with what the record shows could explain it (its verdict's reasons, the differences)."""
        if abs(self.ratio - 1) * 100 <= tolerance_pct:
            return Agreement.AGREES, []
        causes = [reason for _, reason in validity.verdict(self.result)] + list(self.differences)
        return (Agreement.BELOW if self.ratio < 1 else Agreement.ABOVE), causes


CLOSED_LOOP = "Offline"
"""The variant of MLPerf's serving rows a serve run is set beside: Offline, every query at
once, the server's most tokens/s, as serve's closed loop measures it (Server and Interactive
rows are listed, not matched: their latency bounds are LoadGen's, not the run's SLO)."""


def match(result: Result, refs: Sequence[Reference] | None = None) -> Match | None:
    """The closest published throughput for a measured run: same workload and shape, scenario
    and device family; then, in order, the same device count, precision and batch (the nearest
    where none is the same). None when nothing of its family is published. A serve run is its
    served model's workload (workloads.served_as) on the GPUs its server ran on."""
    m, spec = result.metrics, result.spec
    run_family = family(result.device_model)  # a label may name another family's word
    workload: str | None = spec.workload
    devices: int | None = spec.num_processes
    served = isinstance(scenarios.get(spec.scenario), ClientScenario)
    if served:  # the server's model on its GPUs
        found = series(result, "devices")
        workload = workloads.served_as(spec.workload)
        devices = None if found is None else int(found.value)
    if m is None or run_family is None or workload is None or devices is None:
        return None
    candidates = [
        r
        for r in (load() if refs is None else refs)
        if r.workload == workload
        and r.model_args == spec.model_args
        and r.scenario == spec.scenario
        and r.metric in THROUGHPUT_METRICS
        and family(r.platform) == run_family
        and (not served or r.variant == CLOSED_LOOP)
    ]
    if not candidates:
        return None
    best = min(candidates, key=lambda r: _distance(r, spec, devices))
    headline = result.headline
    if served:
        most = series(result, "offline")
        measured: float | None = most.value if most else None
    elif headline is not None and headline.unit == best.unit:  # TFLOP/s, GB/s: the device's
        measured = headline.value
    else:
        measured = m.tokens_per_s if best.in_tokens else m.items_per_s
    if measured is None:
        return None
    per_device = best.per_device or best.num_devices != devices
    return Match(
        result=result,
        reference=best,
        measured=measured / devices if per_device else measured,
        published=best.value / best.num_devices
        if per_device and not best.per_device
        else best.value,
        per_device=per_device,
        differences=tuple(_differences(best, spec, devices)),
        devices=devices,
    )


def _published_batch(ref: Reference, spec: RunSpec) -> tuple[int | None, int, str]:
    """(published batch, the run's batch of the same kind, its name)."""
    if ref.micro_batch is not None:
        return ref.micro_batch, spec.batch_size, "micro batch"
    return ref.global_batch, spec.global_batch, "global batch"


def _distance(ref: Reference, spec: RunSpec, devices: int) -> tuple[bool, bool, bool, float]:
    published, run, _ = _published_batch(ref, spec)
    batch_gap = abs(math.log2(published / run)) if published else math.inf
    return (
        ref.num_devices != devices,
        ref.precision != spec.precision,
        ref.compiled != spec.compile,
        batch_gap,
    )


def _differences(ref: Reference, spec: RunSpec, devices: int) -> list[str]:
    out = []
    if ref.num_devices != devices:
        out.append(f"{devices} device(s) against {ref.num_devices} published: compared per device")
    kind = scenarios.get(ref.scenario)
    if isinstance(kind, ClientScenario):  # the server's settings are its own, not the client's
        return [
            *out,
            f"published with {ref.precision_published or 'unnamed'} weights on "
            f"{ref.framework}; the served model's precision and engine are its server's",
            f"{spec.batch_size} requests in flight in the closed loop against Offline's every "
            "query at once; the run's prompt and output lengths against MLPerf's data set",
        ]
    if ref.precision is None:
        out.append("the published precision is not given")
    elif ref.precision != spec.precision:
        out.append(f"precision {spec.precision} against {ref.precision_published} published")
    if ref.compiled != spec.compile:
        out.append(
            "torch.compile " + ("published, not run" if ref.compiled else "run, not published")
        )
    published, run, name = _published_batch(ref, spec)
    if isinstance(kind, DeviceScenario):  # its batch is calls per step, no condition of it
        return out
    if published is None:
        out.append("the published batch is not given")
    elif published != run:
        out.append(f"{name} {run} against {published} published")
    return out


@dataclass(frozen=True)
class HeadToHead:
    """Two device families' published throughputs in one source table, at one device count:
    at the same micro batch, or (micro_batch None) each at its own best. Derived, not
    published: the ratio is computed here."""

    table: str
    workload: str
    num_devices: int
    micro_batch: int | None
    fast: Reference
    slow: Reference

    @property
    def ratio(self) -> float:
        return self.fast.value / self.slow.value


def head_to_head(refs: Sequence[Reference]) -> list[HeadToHead]:
    """Family against family from published throughputs alone, at the same device count: at
    each micro batch both publish, and each at its own best micro batch (the paper's Table 4
    point: IPUs win at batch 10, GPUs at 512)."""
    groups: dict[tuple[str, str, str | None, int], list[Reference]] = defaultdict(list)
    for r in refs:
        if r.metric in THROUGHPUT_METRICS and family(r.platform):
            groups[(r.source, r.table, r.workload, r.num_devices)].append(r)
    found = []
    for (_, table, workload, devices), rows in groups.items():
        by_family: dict[str, list[Reference]] = defaultdict(list)
        for r in rows:
            by_family[family(r.platform) or ""].append(r)
        if len(by_family) < 2:
            continue
        (_, a_rows), (_, b_rows) = sorted(by_family.items())[:2]
        a_at = {r.micro_batch: r for r in reversed(a_rows)}  # the first row of each batch
        b_at = {r.micro_batch: r for r in reversed(b_rows)}
        pairs: list[tuple[int | None, Reference, Reference]] = [
            (batch, a_at[batch], b_at[batch])
            for batch in sorted(b for b in a_at.keys() & b_at.keys() if b is not None)
        ]
        best = (max(a_rows, key=lambda r: r.value), max(b_rows, key=lambda r: r.value))
        if best not in [(x, y) for _, x, y in pairs]:
            pairs.append((None, *best))
        for batch, x, y in pairs:
            fast, slow = sorted((x, y), key=lambda r: -r.value)
            found.append(HeadToHead(table, workload or rows[0].model, devices, batch, fast, slow))
    return found
