"""Whether anything else ran beside the measurement: other processes' CPU use, CPU steal by the
hypervisor, and other processes on the GPU.

A number taken while something else held the host is not the platform's number (the same cell
gave 3.4 images/s at a host load of 13 and 45.8 at 1.5). The monitor reads the host's CPU time
(/proc/stat through psutil), the cell's own processes' CPU time and the load average at the start
and end of the measured epochs, and NVML's list of processes on the GPU; `contended` judges it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from accelbench.records.frozen import Frozen

if TYPE_CHECKING:
    import torch

    from accelbench.records.spec import RunSpec

log = logging.getLogger(__name__)

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


class HostMonitor:
    """Start at the window's start; stop after the device finished it."""

    def __init__(self, spec: RunSpec, device: torch.device) -> None:
        import torch

        self.device = device
        self.cell_cpus = cell_cpus(spec, device.type, torch.get_num_threads())
        # A server under test on this host is the measurement's subject, not other work.
        endpoint = spec.knob("endpoint")
        self.subject = server_pids(endpoint) if endpoint else []
        self._start: tuple[float, Any, float, float] | None = None

    def start(self) -> None:
        import psutil

        own = _own_cpu_s(self.subject)
        self._start = (time.perf_counter(), psutil.cpu_times(), own, os.getloadavg()[0])

    def stop(self) -> HostActivity | None:
        """The activity since start(); None if it never started (a run stopped in epoch 1)."""
        import psutil

        if self._start is None:
            return None
        start_s, start_cpu, start_own, load_start = self._start
        window_s = max(time.perf_counter() - start_s, 1e-9)
        busy_cpus, steal_frac = _busy(start_cpu, psutil.cpu_times())
        return HostActivity(
            num_cpus=os.cpu_count() or 1,
            cell_cpus=self.cell_cpus,
            busy_cpus=busy_cpus,
            own_cpus=(_own_cpu_s(self.subject) - start_own) / window_s,
            steal_frac=steal_frac,
            load_avg_start=load_start,
            load_avg_end=os.getloadavg()[0],
            window_s=window_s,
            other_gpu_pids=_other_gpu_pids(self.device),
        )


def _busy(before: Any, after: Any) -> tuple[float, float | None]:
    """(CPUs kept busy on average, share of CPU time stolen or None where not reported) between
    two psutil.cpu_times() readings of the whole host."""
    delta = {f: getattr(after, f) - getattr(before, f) for f in after._fields}
    idle = delta.get("idle", 0.0) + delta.get("iowait", 0.0)
    steal = delta.get("steal")
    # guest and guest_nice are already inside user and nice on Linux.
    total = sum(v for f, v in delta.items() if f not in ("guest", "guest_nice"))
    if not total:
        return 0.0, None
    busy = total - idle - (steal or 0.0)
    return (os.cpu_count() or 1) * busy / total, None if steal is None else steal / total


def _own_cpu_s(subject: Iterable[int] = ()) -> float:
    """CPU seconds used so far by this process and its children (loader workers), and by the
    `subject` processes (a server under test) and theirs: a live process's own, and an ended
    one's through its parent, which waited for it."""
    import psutil

    processes: dict[int, Any] = {}  # by pid: a server that is the cell's child counts once
    for pid in {os.getpid(), *subject}:
        try:
            root = psutil.Process(pid)
            processes |= {p.pid: p for p in [root, *root.children(recursive=True)]}
        except psutil.Error:  # ended meanwhile
            continue
    seconds = 0.0
    for process in processes.values():
        try:
            seconds += sum(process.cpu_times()[:4])  # user, system and the children's
        except psutil.Error:
            continue
    return seconds


def server_pids(endpoint: str) -> list[int]:
    """The processes listening on the endpoint's port when its host is this one (a server under
    test beside its client); empty for another host or where the sockets cannot be read."""
    import socket
    from urllib.parse import urlsplit

    import psutil

    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        here = {"localhost", socket.gethostname(), socket.getfqdn()}
        local = url.hostname in here or socket.gethostbyname(url.hostname or "").startswith("127.")
        listening = psutil.net_connections(kind="tcp") if local else []
    except (OSError, psutil.Error) as exc:
        log.info("the server's processes are not known: %s", exc)
        return []
    return sorted(
        {c.pid for c in listening if c.status == "LISTEN" and c.laddr.port == port and c.pid}
    )


def _other_gpu_pids(device: torch.device) -> list[int] | None:
    """Processes outside this one and its children with the device open, from NVML."""
    if device.type != "cuda":
        return None
    try:
        import psutil
        import pynvml
        import torch

        pynvml.nvmlInit()
        try:
            uuid = str(torch.cuda.get_device_properties(device).uuid)
            handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
            running = [
                *pynvml.nvmlDeviceGetComputeRunningProcesses(handle),
                *pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle),
            ]
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no NVML, or no permission: not known
        log.info("GPU processes not known: %s", exc)
        return None
    me = psutil.Process()
    ours = {me.pid, *(c.pid for c in me.children(recursive=True))}
    return sorted({p.pid for p in running} - ours)


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


class BusySince:
    """What other processes keep busy from now on, this process and its children (a cell
    server, probes) left out: the warning before a sweep samples the seconds its plan took
    instead of sleeping for a sample of its own."""

    def __init__(self) -> None:
        import psutil

        self._start = (time.perf_counter(), psutil.cpu_times(), _own_cpu_s())

    def others(self, least_s: float = 0.5) -> tuple[float, int, float]:
        """(CPUs other processes kept busy, the host's CPUs, 1-min load average) since the
        start, waiting until the sample spans `least_s`."""
        import psutil

        start_s, start_cpu, start_own = self._start
        time.sleep(max(0.0, least_s - (time.perf_counter() - start_s)))
        window_s = time.perf_counter() - start_s
        busy_cpus, _ = _busy(start_cpu, psutil.cpu_times())
        own_cpus = (_own_cpu_s() - start_own) / window_s
        return max(0.0, busy_cpus - own_cpus), os.cpu_count() or 1, os.getloadavg()[0]
