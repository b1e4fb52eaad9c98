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

from accelbench.records.contention import HostActivity, cell_cpus

if TYPE_CHECKING:
    from accelbench.engines import Place
    from accelbench.records.spec import RunSpec

log = logging.getLogger(__name__)


class HostMonitor:
    """Start at the window's start; stop after the device finished it."""

    def __init__(self, spec: RunSpec, device: Place) -> None:
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


def _other_gpu_pids(device: Place) -> list[int] | None:
    """Processes outside this one and its children with the device open, from NVML."""
    if device.type != "cuda":
        return None
    try:
        import psutil
        import pynvml
        import torch

        pynvml.nvmlInit()
        try:
            uuid = str(torch.cuda.get_device_properties(device.index or 0).uuid)
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
