"""What a device or a server drew over a measured window (EnergyMetrics), which clock-event
reasons count as a slowdown, and how ranks' readings add up. The meters that take these readings
are in execution.meters.energy.
"""

from __future__ import annotations

import statistics
from typing import Literal

from pydantic import Field

from accelbench.records.frozen import Frozen

EnergyMethod = Literal[
    "nvml-energy-counter", "amdsmi-energy-counter", "rapl", "power series", "not available"
]
GPU_COUNTERS = ("nvml-energy-counter", "amdsmi-energy-counter")
"""Methods whose counter is one GPU board's (a rank's own: ranks' boards add up)."""

# NVML clock-event reasons that mean the device ran slower than asked (nvml.h,
# nvmlClocksEventReason*); idle, application clocks and sync boost are not slowdowns.
THROTTLE_REASONS = {
    0x4: "sw-power-cap",
    0x8: "hw-slowdown",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "hw-power-brake",
}


class EnergyMetrics(Frozen):
    method: EnergyMethod
    scope: str
    """What the counter covers: one GPU board, or the CPU packages."""
    joules: float | None = None
    avg_power_w: float | None = None
    peak_power_w: float | None = None
    """Highest sampled power (NVML only)."""
    power_limit_w: float | None = None
    default_power_limit_w: float | None = None
    """The board's default power limit (NVML), against which a software power cap is judged."""
    sm_clock_mhz_median: float | None = None
    throttle_reasons: list[str] = Field(default_factory=list)
    """Slowdown reasons NVML reported at any sample of the window."""
    num_samples: int = 0

    @property
    def slowdowns(self) -> list[str]:
        """The reasons that held the device below what it is made to do. A software power cap at
        the board's default limit is its rated power, where a large matmul on an H100 or H200
        always sits and every published figure was measured too: only a cap lowered below the
        default (or one whose default is unknown) counts."""
        rated = (
            self.power_limit_w is not None
            and self.default_power_limit_w is not None
            and self.power_limit_w >= self.default_power_limit_w
        )
        return [r for r in self.throttle_reasons if not (rated and r == "sw-power-cap")]

    @property
    def throttled(self) -> bool:
        return bool(self.slowdowns)


def combine(per_rank: list[tuple[str, EnergyMetrics]]) -> EnergyMetrics:
    """The energy of a data-parallel run from each rank's (hostname, meter reading): a GPU board
    counter per rank adds up; a CPU package counter covers every rank on its host, so it is
    counted once per host."""
    readings = [e for _, e in per_rank]
    first = readings[0]
    if any(e.method != first.method or e.joules is None for e in readings):
        return EnergyMetrics(method="not available", scope=f"{len(readings)} ranks")
    if first.method == "rapl":
        readings = list({host: e for host, e in per_rank}.values())
    hosts = len({host for host, _ in per_rank})
    scope = (
        f"{len(readings)} GPU boards on {hosts} host(s)"
        if first.method in GPU_COUNTERS
        else f"CPU packages of {hosts} host(s)"
    )
    clocks = [e.sm_clock_mhz_median for e in readings if e.sm_clock_mhz_median is not None]

    def total(values: list[float | None]) -> float | None:
        return None if None in values else sum(x for x in values if x is not None)

    return EnergyMetrics(
        method=first.method,
        scope=scope,
        joules=sum(e.joules or 0.0 for e in readings),
        avg_power_w=sum(e.avg_power_w or 0.0 for e in readings),
        power_limit_w=total([e.power_limit_w for e in readings]),
        default_power_limit_w=total([e.default_power_limit_w for e in readings]),
        sm_clock_mhz_median=statistics.median(clocks) if clocks else None,
        throttle_reasons=sorted({r for e in readings for r in e.throttle_reasons}),
        num_samples=sum(e.num_samples for e in readings),
    )
