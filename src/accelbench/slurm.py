"""A Slurm job script that runs an accelbench sweep on an allocation of N nodes x G devices.

The script's batch step runs `accelbench run` on the first node; each cell with several nodes
then starts its ranks with srun, one torchrun per node meeting at a c10d rendezvous (see
launch.command). Cell files live in a directory under the submit directory, which every node
sees; results go to one database, written by the batch step only.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import Field

from accelbench.errors import AccelbenchError
from accelbench.frozen import Frozen
from accelbench.launch import CELL_DIR
from accelbench.store import is_url

_TIME = re.compile(r"^(\d+-)?\d{1,2}(:\d{2}){0,2}$")


class JobSpec(Frozen):
    """The allocation a job script asks Slurm for."""

    nodes: int = Field(gt=0)
    gpus_per_node: int = Field(ge=0)
    """GPUs on each node (0 for a CPU-only partition)."""
    cpus_per_node: int | None = Field(default=None, gt=0)
    time: str = "01:00:00"
    """Time limit in Slurm's notation: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS."""
    partition: str | None = None
    account: str | None = None
    job_name: str = "accelbench"


def script(job: JobSpec, run_args: list[str], db: Path | str) -> str:
    """The sbatch script that runs `accelbench run_args...` into the database `db`."""
    if not _TIME.match(job.time):
        raise AccelbenchError(
            f"--time {job.time!r} is not a Slurm time: write e.g. 90, 01:30:00 or 1-00:00:00"
        )
    directives = [
        f"--job-name={job.job_name}",
        f"--nodes={job.nodes}",
        "--ntasks-per-node=1",  # one torchrun agent per node, which starts a rank per device
        f"--time={job.time}",
        "--output=%x-%j.out",
    ]
    if job.gpus_per_node:
        directives.append(f"--gpus-per-node={job.gpus_per_node}")
    if job.cpus_per_node:
        directives.append(f"--cpus-per-task={job.cpus_per_node}")
    if job.partition:
        directives.append(f"--partition={job.partition}")
    if job.account:
        directives.append(f"--account={job.account}")
    db_arg = str(db) if is_url(db) else str(Path(db).resolve())
    command = shlex.join([sys.executable, "-m", "accelbench", *run_args, "--db", db_arg])
    return "\n".join(
        [
            "#!/bin/bash",
            *(f"#SBATCH {d}" for d in directives),
            "set -euo pipefail",
            "",
            "# Every node reads each cell's spec and writes its result here.",
            f'export {CELL_DIR}="${{SLURM_SUBMIT_DIR:-$PWD}}/.accelbench-cells"',
            f'mkdir -p "${CELL_DIR}"',
            "# NCCL: fail a hung collective instead of waiting forever; say why in the log.",
            "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
            "export NCCL_DEBUG=${NCCL_DEBUG:-WARN}",
            "# Set NCCL_SOCKET_IFNAME (and NCCL_IB_HCA) here if the nodes have several networks.",
            "",
            command,
            "",
        ]
    )


def submit(path: Path) -> str:
    """Submit the script with sbatch; returns sbatch's answer (the job id)."""
    if shutil.which("sbatch") is None:
        raise AccelbenchError(
            f"sbatch not found: run this on a Slurm login node, or submit {path} there"
        )
    proc = subprocess.run(["sbatch", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AccelbenchError(f"sbatch refused {path}: {proc.stderr.strip()}")
    return proc.stdout.strip()
