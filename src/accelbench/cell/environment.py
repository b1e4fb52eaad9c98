"""The environment a cell runs in, captured at its start: devices, driver, software versions, the
host and the variables that change speed (a secret's name only, never its value).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import re
import socket
from pathlib import Path

from accelbench import secrets
from accelbench.records.environment import DeviceInfo, Environment

_GIB = 2**30

_VERSIONS_OF = (
    *("torch", "torchvision", "triton", "torchao", "timm", "transformers", "accelerate"),
    *("jax", "jaxlib", "optax", "tensorflow", "tensorflow-cpu", "keras", "numpy", "accelbench"),
)


NUMERIC_ENV = (
    *("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "NCCL_"),
    *("OMP_", "MKL_", "KMP_", "OPENBLAS_", "GOMP_", "CUBLAS_", "CUDNN_", "PYTORCH_", "TORCH_"),
    *("TORCHINDUCTOR_", "XLA_", "JAX_", "NVIDIA_TF32_OVERRIDE", "TF32", "UCX_", "FI_"),
    # TensorFlow's own, by name: TF_ alone also matches Terraform's TF_VAR_* (secrets, often)
    *("TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS"),
    *("TF_GPU_ALLOCATOR", "TF_FORCE_GPU_ALLOW_GROWTH"),
)
"""Environment variables (names, or prefixes ending in _) that change what a cell measures:
which devices it sees, how collectives and thread pools behave, torch's and its libraries'
settings."""


def secret(name: str, value: str) -> bool:
    """Whether a variable is never to be kept: named like a secret (TORCH_API_KEY), holding a
    URL with a password, or holding a secret this process was handed (a serve API key)."""
    return secrets.is_secret_name(name) or secrets.scrub(value) != value


def accelbench_commit() -> str | None:
    """The git commit of accelbench's source, with "-dirty" for uncommitted changes: asked of
    git where it runs from a checkout (an editable install), else the one setuptools-scm baked
    into the built package (_version.py); None where neither says."""
    import subprocess

    package = Path(__file__).resolve().parents[1]  # .../src/accelbench
    root = package.parents[1]  # the checkout, above src/
    if not (root / ".git").exists():
        return _built_commit()
    try:
        found = subprocess.run(
            ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return _built_commit()
    return found.stdout.strip() or None if found.returncode == 0 else _built_commit()


def _built_commit() -> str | None:
    """The commit setuptools-scm baked in: whole where the package was built from git, else
    (a wheel built from the sdist, which has no git) the short one its version carries, as in
    0.1.dev382+g202901fc0.d20261127 (the date: built with uncommitted changes)."""
    try:
        _version = importlib.import_module("accelbench._version")
    except ImportError:  # a source tree never built
        return None
    node, dirty = getattr(_version, "__commit__", None), getattr(_version, "__dirty__", False)
    if not node:
        local = str(getattr(_version, "__version__", "")).partition("+")[2].split(".")
        node = next((part for part in local if re.fullmatch(r"g[0-9a-f]{7,}", part)), None)
        dirty = any(re.fullmatch(r"d\d{8}", part) for part in local)
    if not node:
        return None
    node = node[1:] if re.fullmatch(r"g[0-9a-f]{7,}", node) else node  # git describe's g<hash>
    return node[:12] + ("-dirty" if dirty else "")


def resolve_device(requested: str) -> str:
    """The device type to use: `requested`, or for 'auto' the accelerator torch reports, else cpu."""
    import torch

    if requested != "auto":
        return requested
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return accelerator.type if accelerator is not None else "cpu"


def capture(device: str = "auto", hidden: tuple[str, ...] = ()) -> Environment:
    """This process's platform; environment variables named in `hidden` (a secret's, such as
    the one holding a server's API key) are never kept."""
    import psutil
    import torch

    device_type = resolve_device(device)
    cpu = _cpu_model()
    host_mem_gib = psutil.virtual_memory().total / _GIB
    if device_type == "cpu":
        devices = [DeviceInfo(name=cpu, memory_gib=round(host_mem_gib, 1))]
    else:
        devices = _accelerators(device_type)
    cudnn = torch.backends.cudnn.version() if device_type == "cuda" else None
    return Environment(
        hostname=socket.gethostname(),
        os=platform.platform(),
        python=platform.python_version(),
        cpu_model=cpu,
        num_cpu_cores=psutil.cpu_count(logical=False),
        num_cpu_threads=os.cpu_count() or 1,
        num_numa_nodes=_numa_nodes(),
        host_mem_gib=round(host_mem_gib, 1),
        torch_num_threads=torch.get_num_threads(),
        device_type=device_type,
        devices=devices,
        driver_version=_nvidia_driver() if device_type == "cuda" else None,
        cuda_version=torch.version.cuda if device_type == "cuda" else None,
        cudnn_version=str(cudnn) if cudnn else None,
        versions=_versions(),
        env_vars={
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(NUMERIC_ENV) and len(v) < 500 and k not in hidden and not secret(k, v)
        },
    )


def _accelerators(device_type: str) -> list[DeviceInfo]:
    import torch

    module = getattr(torch, device_type)
    if not module.is_available():
        from accelbench.errors import AccelbenchError

        raise AccelbenchError(
            f"no {device_type} device is available here; use --device cpu or auto"
        )
    infos = []
    for index in range(module.device_count()):
        props = module.get_device_properties(index)
        memory = getattr(props, "total_memory", None)
        major, minor = getattr(props, "major", None), getattr(props, "minor", None)
        infos.append(
            DeviceInfo(
                name=props.name,
                memory_gib=round(memory / _GIB, 1) if memory else None,
                capability=f"{major}.{minor}" if device_type == "cuda" else None,
            )
        )
    return infos


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _numa_nodes() -> int:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return max(len(nodes), 1)


def _nvidia_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return str(pynvml.nvmlSystemGetDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library or no permission: the version is simply unknown
        return None


def _versions() -> dict[str, str]:
    import torch

    found = {"python": platform.python_version()}
    for name in _VERSIONS_OF:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    if commit := accelbench_commit():
        found["accelbench_commit"] = commit
    if torch.version.hip:
        found["hip"] = str(torch.version.hip)
    if torch.cuda.is_available() and torch.version.cuda:
        found["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    return found
