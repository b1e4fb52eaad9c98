"""Whether anything else ran beside the measurement, as data: the host activity a result keeps
(HostActivity), the verdict on it (`contended`), and the CPUs a cell needs and may take (auto
threads). The monitor that reads the host is in execution.meters.host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from accelbench.records.frozen import Frozen

if TYPE_CHECKING:
    from accelbench.records.spec import RunSpec


SLACK_CPUS = 0.5
"""Other processes may keep this much of a CPU busy beyond the CPUs the cell leaves spare
(daemons, the launcher waiting on the cell) before the cell counts as contended."""
SHORT_FRAC = 0.85
"""A cell that got less than this share of the CPUs it needs, while other processes used more
than it left spare, was held back by them even where they stayed within SLACK_CPUS: on a full
host the scheduler shares CPUs fairly, so a one-thread cell beside two spinners on two CPUs gets
two thirds of its one, and the spinners 1.33."""
MIN_WINDOW_S = 0.25
"""CPU times tick in hundredths of a second, so a reading over this long is good to about 0.1
CPU; shorter windows are judged by the load average alone: more runnable work than the host has
CPUs as the steady state began."""
RESOLUTION_CPUS = 0.1
"""What CPU times over MIN_WINDOW_S or more can tell from nothing: less use by others is idle
(two ranks of a CPU run on an idle host were flagged for 0.01 CPU of daemons)."""
MAX_STEAL_FRAC = 0.05
"""CPU time taken by the hypervisor for other guests above which a virtual machine's numbers are
not its own."""


class HostActivity(Frozen):
    """What the host did while the steady state was measured."""

    num_cpus: int
    """Logical CPUs of the host."""
    cell_cpus: float
    """CPUs the cell can keep busy: torch threads per process on the CPU (one per process on an
    accelerator, to drive it) times processes, plus loader workers; at most num_cpus."""
    busy_cpus: float
    """CPUs the whole host kept busy, on average over the window."""
    own_cpus: float
    """CPUs the cell's processes (and their loader workers) kept busy, on average."""
    steal_frac: float | None
    """Share of CPU time a hypervisor gave to other guests (None where not reported)."""
    load_avg_start: float
    load_avg_end: float
    """The 1-minute load average at the window's start and end."""
    window_s: float
    other_gpu_pids: list[int] | None = None
    """Processes other than the cell's that had the cell's GPU open (None: not known)."""

    @property
    def others_cpus(self) -> float:
        """CPUs kept busy by processes other than the cell's."""
        return max(0.0, self.busy_cpus - self.own_cpus)


def contended(activity: HostActivity) -> str | None:
    """Why the measurement shared its platform with other work, in one line; None if it did not."""
    spare = activity.num_cpus - activity.cell_cpus
    reasons = []
    if activity.window_s < MIN_WINDOW_S:
        if activity.load_avg_start > activity.num_cpus + SLACK_CPUS:
            reasons.append(
                f"the 1-min load was {activity.load_avg_start:.1f} on {activity.num_cpus} CPUs "
                "as the steady state began"
            )
    elif activity.others_cpus > spare + SLACK_CPUS or (
        activity.others_cpus > spare + RESOLUTION_CPUS
        and activity.own_cpus < SHORT_FRAC * activity.cell_cpus
    ):
        reasons.append(
            f"other processes kept {activity.others_cpus:.1f} of {activity.num_cpus} CPUs busy "
            f"(the cell needs {activity.cell_cpus:g} and got {activity.own_cpus:.2g}; 1-min load "
            f"{activity.load_avg_start:.1f} to {activity.load_avg_end:.1f})"
        )
    steal = activity.steal_frac if activity.window_s >= MIN_WINDOW_S else None
    if steal is not None and steal > MAX_STEAL_FRAC:
        reasons.append(f"the hypervisor stole {100 * steal:.0f}% of CPU time")
    if activity.other_gpu_pids:
        pids = ", ".join(map(str, activity.other_gpu_pids[:5]))
        reasons.append(f"other processes on the GPU (pid {pids})")
    return "; ".join(reasons) + ": run where nothing else does" if reasons else None


def cpus_needed(spec: RunSpec, device_type: str, num_cpus: int) -> float:
    """The CPUs a cell will keep busy, before it runs: its --threads (torch's default: every CPU
    for one process, one each under torchrun with several) on the CPU, one per process on an
    accelerator, and the loader workers."""
    default = num_cpus if spec.num_processes == 1 else 1
    per_process = (
        (spec.threads if isinstance(spec.threads, int) else default) if device_type == "cpu" else 1
    )
    return min(num_cpus, per_process * spec.processes_per_node + spec.loader_workers())


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a Slurm job's cpuset), else the
    machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def free_cpus(others: float, num_cpus: int) -> int:
    """The CPUs a cell may use beside what other processes keep busy and not be flagged (0 when
    none is), within this process's CPU affinity (a Slurm job's cpuset)."""
    mine = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else num_cpus
    return max(0, min(mine, int(num_cpus + SLACK_CPUS - others)))


FREE_CPUS_ENV = "ACCELBENCH_FREE_CPUS"
"""The CPUs other work left free as the sweep started (free_cpus), which the sweep hands its
cells: a host's state, not the cell's configuration, so it is no part of a spec or its key."""


def auto_threads(spec: RunSpec, device_type: str, free: int, num_cpus: int) -> int | None:
    """The threads a cell with --threads auto (and unset, for a CPU cell of one process) runs
    with: the CPUs other work leaves free, at least one, as threads that wait for a core another
    process holds ran 20-58x slower than --threads 1 on shared nodes. None where torch's own
    default is that (every CPU free; torchrun's one a rank); the user's own count as given."""
    if isinstance(spec.threads, int):
        return spec.threads
    if device_type != "cpu":
        return None
    per_node = spec.processes_per_node
    if per_node > 1:  # torchrun's ranks: one thread each unless asked to fit
        return max(1, free // per_node) if spec.threads == "auto" else None
    return None if free >= num_cpus else max(1, free)


def busy_warning(others: float, num_cpus: int, load: float, needed: float) -> str | None:
    """The warning before a sweep when other processes keep busy CPUs the cells need (None when
    they fit beside them), naming the --threads that would leave the busy CPUs free."""
    free = free_cpus(others, num_cpus)
    if others <= num_cpus - needed + SLACK_CPUS:
        return None
    fix = (
        f"give --threads {free} (with --workers 0) to leave the busy CPUs free"
        if free >= 1
        else "even --threads 1 (with --workers 0) shares a busy CPU: run where nothing else does"
    )
    return (
        f"other processes keep {others:.1f} of {num_cpus} CPUs busy (1-min load {load:.1f}) "
        f"and the cells need {needed:g}: results taken now will be flagged contended; {fix}"
    )


def cell_cpus(spec: RunSpec, device_type: str, torch_threads: int) -> float:
    per_process = torch_threads if device_type == "cpu" else 1
    return min(os.cpu_count() or 1, per_process * spec.num_processes + spec.loader_workers())


def combine(per_rank: list[tuple[str, HostActivity]]) -> HostActivity:
    """The activity of a run over several processes from each rank's (hostname, reading): on
    each host the ranks' own CPU and needs add up, as every rank counts the others as busy; the
    host where other work took the most is the run's."""
    hosts: dict[str, list[HostActivity]] = {}
    for host, activity in per_rank:
        hosts.setdefault(host, []).append(activity)
    merged = []
    for readings in hosts.values():
        first = readings[0]
        pids = {p for a in readings for p in (a.other_gpu_pids or [])}
        known = any(a.other_gpu_pids is not None for a in readings)
        merged.append(
            first.model_copy(
                update={
                    "cell_cpus": min(first.num_cpus, sum(a.cell_cpus for a in readings)),
                    "busy_cpus": max(a.busy_cpus for a in readings),
                    "own_cpus": sum(a.own_cpus for a in readings),
                    "steal_frac": max(steals)
                    if (steals := _known(a.steal_frac for a in readings))
                    else None,
                    "other_gpu_pids": sorted(pids) if known else None,
                }
            )
        )
    return max(merged, key=lambda a: a.others_cpus - (a.num_cpus - a.cell_cpus))


def _known(values: Iterable[float | None]) -> list[float]:
    return [v for v in values if v is not None]
