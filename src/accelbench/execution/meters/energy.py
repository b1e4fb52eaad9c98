"""Energy over the measured window, from a hardware counter or not at all.

NVIDIA GPUs: NVML's total-energy counter, read at the start and end of the window, with power,
SM clock and clock-event (throttle) reasons sampled in a thread. AMD GPUs (ROCm): amdsmi's energy
accumulator, read at the start and end (its key was renamed in amdsmi 6.2.1; both are read; no
samples: amdsmi's power readings differ between versions). CPUs: RAPL package counters in
/sys/class/powercap where the kernel exposes them and this user may read them. Anything else is
"not available": no estimate from a TDP is ever shown as a measurement. A server under test on
this host (serve) is metered by CounterMeter: the GPUs its processes run on, or the CPU packages.
"""

from __future__ import annotations

import functools
import logging
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.records.energy import THROTTLE_REASONS, EnergyMethod, EnergyMetrics

if TYPE_CHECKING:
    from accelbench.engines import Place

log = logging.getLogger(__name__)

POWERCAP = Path("/sys/class/powercap")
SAMPLE_S = 0.1


class EnergyMeter:
    """Start before the window, stop after the device finished it."""

    def __init__(self, device: Place, powercap: Path = POWERCAP) -> None:
        self.device, self.powercap = device, powercap
        self._nvml: Any = None
        self._handle: Any = None
        self._samples: list[tuple[float, float, int]] = []  # (power W, SM MHz, reasons bits)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_j = 0.0
        self._start_s = 0.0
        domains = _rapl_domains(powercap) if device.type == "cpu" else []
        self._rapl = (
            CounterMeter("rapl", f"CPU packages ({len(domains)})", _rapl_counters(domains))
            if domains
            else None
        )
        self._amd: Callable[[], float] | None = None
        if device.type == "cuda":
            import torch

            if torch.version.hip:  # ROCm: an AMD GPU
                self._open_amdsmi()
            else:
                self._open_nvml()

    def start(self) -> None:
        self._start_s = time.perf_counter()
        if self._amd is not None:
            self._start_j = self._amd()
        elif self._handle is not None:
            self._start_j = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1e3
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        elif self._rapl:
            self._rapl.start()

    def stop(self) -> EnergyMetrics:
        seconds = time.perf_counter() - self._start_s
        if self._amd is not None:
            joules = self._amd() - self._start_j
            return EnergyMetrics(
                method="amdsmi-energy-counter",
                scope=f"GPU {self.device.index or 0} board",
                joules=joules,
                avg_power_w=joules / seconds if seconds > 0 else None,
            )
        if self._handle is not None:
            joules = (
                self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1e3 - self._start_j
            )
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
            power = [p for p, _, _ in self._samples]
            reasons = 0
            for _, _, bits in self._samples:
                reasons |= bits
            return EnergyMetrics(
                method="nvml-energy-counter",
                scope=f"GPU {self.device.index or 0} board",
                joules=joules,
                avg_power_w=joules / seconds,
                peak_power_w=max(power, default=None),
                power_limit_w=self._nvml.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1e3,
                default_power_limit_w=self._default_limit_w(),
                sm_clock_mhz_median=statistics.median(c for _, c, _ in self._samples)
                if self._samples
                else None,
                throttle_reasons=[name for bit, name in THROTTLE_REASONS.items() if reasons & bit],
                num_samples=len(self._samples),
            )
        if self._rapl:
            return self._rapl.stop()
        scope = "CPU" if self.device.type == "cpu" else self.device.type
        return EnergyMetrics(method="not available", scope=scope)

    def _default_limit_w(self) -> float | None:
        try:
            return self._nvml.nvmlDeviceGetPowerManagementDefaultLimit(self._handle) / 1e3
        except self._nvml.NVMLError:  # not supported on this board
            return None

    def _open_nvml(self) -> None:
        import torch

        try:
            import pynvml

            pynvml.nvmlInit()
            uuid = str(torch.cuda.get_device_properties(self.device.index or 0).uuid)
            try:
                self._handle = pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
            except pynvml.NVMLError:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.device.index or 0)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)  # Volta and later
            self._nvml = pynvml
        except Exception as exc:  # no NVML, or a GPU without the counter
            log.warning("NVML energy counter not available: %s", exc)
            self._handle = None

    def _open_amdsmi(self) -> None:
        """amdsmi's handle of this device, found by its PCI address (HIP_VISIBLE_DEVICES
        renumbers devices; the address does not change)."""
        import torch

        try:
            import amdsmi

            amdsmi.amdsmi_init()
            props: Any = torch.cuda.get_device_properties(self.device.index or 0)  # not stubbed
            here = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}"
            (handle,) = [
                h
                for h in amdsmi.amdsmi_get_processor_handles()
                if str(amdsmi.amdsmi_get_gpu_device_bdf(h)).lower().startswith(here)
            ]
            read = functools.partial(_amdsmi_joules, amdsmi, handle)
            read()
            self._amd = read
        except Exception as exc:  # no amdsmi, no ROCm driver, a GPU without the counter
            log.warning("amdsmi energy counter not available: %s", exc)

    def _sample(self) -> None:
        nvml, handle = self._nvml, self._handle
        while not self._stop.wait(SAMPLE_S):
            self._samples.append(
                (
                    nvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                    nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
                    nvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
                )
            )


def _amdsmi_joules(amdsmi: Any, handle: Any) -> float:
    """An AMD GPU's energy counter in joules: ticks times their size in microjoules."""
    count = amdsmi.amdsmi_get_energy_count(handle)
    ticks = count["energy_accumulator"] if "energy_accumulator" in count else count["power"]
    return float(ticks) * float(count["counter_resolution"]) / 1e6


def _rapl_domains(powercap: Path) -> list[Path]:
    """The readable package-level RAPL domains (intel-rapl:N, also used by AMD's driver)."""
    domains = []
    for domain in sorted(powercap.glob("intel-rapl:*")):
        if domain.name.count(":") != 1:
            continue  # a sub-domain (core, dram) of a package
        try:
            _read_int(domain / "energy_uj")
        except (OSError, ValueError):
            continue  # root-only since 2020 on most distributions
        domains.append(domain)
    return domains


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


class WindowMeter(Protocol):
    """Energy over a window: start before it, stop after it (CounterMeter, a logged series)."""

    def start(self) -> None: ...

    def stop(self) -> EnergyMetrics: ...


class CounterMeter:
    """Energy over each window from counters that only grow (a RAPL counter wraps at `wrap`
    joules), summed: a server's devices over a serving trial, a cell's CPU packages."""

    def __init__(
        self,
        method: EnergyMethod,
        scope: str,
        counters: list[tuple[Callable[[], float], float | None]] | None = None,
        boards: int | None = None,
    ) -> None:
        self.method, self.scope, self.counters = method, scope, counters or []
        self.boards = boards
        """The GPU boards the counters read, where they are GPUs'."""
        self._start: list[float] = []
        self._start_s = 0.0

    def start(self) -> None:
        self._start = [read() for read, _ in self.counters]
        self._start_s = time.perf_counter()

    def stop(self) -> EnergyMetrics:
        if not self.counters:
            return EnergyMetrics(method="not available", scope=self.scope)
        seconds = time.perf_counter() - self._start_s
        joules = 0.0
        for (read, wrap), start in zip(self.counters, self._start, strict=True):
            delta = read() - start
            joules += delta + wrap if delta < 0 and wrap else delta
        return EnergyMetrics(
            method=self.method,
            scope=self.scope,
            joules=joules,
            avg_power_w=joules / seconds if seconds > 0 else None,
        )


def server_meter(pids: list[int], powercap: Path = POWERCAP) -> CounterMeter:
    """A meter of what a server whose processes are `pids` (found listening on this host; its
    children, as vLLM's engine workers, count too) draws: NVML's energy counter of each NVIDIA
    GPU one of them runs on; else, for a server on no GPU, RAPL's CPU packages, which count all
    of this host's work, the client's too; else none, its scope saying why."""
    if not pids:
        return CounterMeter(
            "not available", "the server is not on this host: give its devices' power another way"
        )
    family = set(pids) | {c for pid in pids for c in _children(pid)}
    gpus = _nvml_gpus(family)
    if gpus:
        nvml = gpus[0][2]
        counters: list[tuple[Callable[[], float], float | None]] = [
            (functools.partial(_nvml_joules, nvml, handle), None) for _, handle, _ in gpus
        ]
        boards = ", ".join(str(index) for index, _, _ in gpus)
        return CounterMeter(
            "nvml-energy-counter", f"GPU {boards} board(s) the server runs on", counters, len(gpus)
        )
    if domains := _rapl_domains(powercap):
        scope = f"CPU packages ({len(domains)}) of this host: the server's and all else's"
        return CounterMeter("rapl", scope, _rapl_counters(domains))
    return CounterMeter(
        "not available",
        "no counter the server's devices can be read by (NVML on its GPUs; RAPL's "
        f"{powercap} needs read access)",
    )


def _nvml_joules(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) / 1e3


def _rapl_counters(domains: list[Path]) -> list[tuple[Callable[[], float], float | None]]:
    """Each RAPL domain's energy counter in joules, and where it wraps."""
    return [
        (functools.partial(_rapl_joules, d), _read_int(d / "max_energy_range_uj") / 1e6)
        for d in domains
    ]


def _rapl_joules(domain: Path) -> float:
    return _read_int(domain / "energy_uj") / 1e6


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _nvml_gpus(pids: set[int]) -> list[tuple[int, Any, Any]]:
    """(index, handle, pynvml) of each NVIDIA GPU where one of `pids` runs; empty without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            running = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            if pids & {p.pid for p in running}:
                pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # Volta and later
                found.append((index, handle, pynvml))
        return found
    except Exception as exc:  # no NVML, no GPU, a GPU without the counter
        log.info("no NVML energy counter for the server: %s", exc)
        return []
