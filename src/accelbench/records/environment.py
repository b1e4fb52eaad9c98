"""The platform a result was measured on: host, devices and software versions, as data. It is
captured by cell.environment (which imports torch); the models here do not, so results can be
read without it.
"""

from __future__ import annotations

from pydantic import Field

from accelbench.records.frozen import Frozen


class DeviceInfo(Frozen):
    name: str
    memory_gib: float | None = None
    capability: str | None = None
    """CUDA compute capability, e.g. "9.0"."""


class Environment(Frozen):
    hostname: str
    os: str
    python: str
    cpu_model: str
    num_cpu_cores: int | None
    """Physical cores."""
    num_cpu_threads: int
    num_numa_nodes: int
    host_mem_gib: float
    torch_num_threads: int
    device_type: str
    """The torch device type the run used: cuda, xpu, mps or cpu."""
    devices: list[DeviceInfo]
    """Devices of that type visible to the process (for cpu: the host processor)."""
    driver_version: str | None = None
    cuda_version: str | None = None
    cudnn_version: str | None = None
    versions: dict[str, str]
    """Versions of what shapes the numbers: Python packages, accelbench's commit, and on
    accelerators NCCL and HIP."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """The environment variables that change numbers (NUMERIC_ENV) as the cell saw them; empty
    in records made before they were kept."""

    @property
    def platform(self) -> str:
        """The name a person calls this platform by: the device model."""
        return self.devices[0].name if self.devices else self.device_type

    @property
    def cuda_capability(self) -> tuple[int, int] | None:
        if self.device_type != "cuda" or not self.devices or not self.devices[0].capability:
            return None
        major, minor = self.devices[0].capability.split(".")
        return int(major), int(minor)

    def software(self) -> dict[str, str]:
        """What history attributes a change to, flat: each version, the driver, CUDA, cuDNN, the
        OS (its kernel), Python, the threads and each numeric variable (as $NAME)."""
        found = {k: str(v) for k, v in self.versions.items()}
        for name in _SOFTWARE:
            if (value := getattr(self, name)) is not None:
                found[name] = str(value)
        return found | {f"${k}": v for k, v in self.env_vars.items()}

    def fingerprint(self) -> dict[str, object]:
        """What identifies the platform in a result's key: the same machine, devices and torch."""
        return {
            "hostname": self.hostname,
            "device_type": self.device_type,
            "devices": [d.name for d in self.devices],
            "torch": self.versions.get("torch"),
        }


_SOFTWARE = ("driver_version", "cuda_version", "cudnn_version", "os", "python", "torch_num_threads")
