"""A Slurm job script that runs an accelbench sweep on an allocation of N nodes x G devices.

The script's batch step runs `accelbench run` on the first node; each cell with several nodes
then starts its ranks with srun, one torchrun per node meeting at a c10d rendezvous (see
launch.command). Cell files live in a directory under the submit directory, which every node
sees; results go to one database, written by the batch step only.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import Field, field_validator

from accelbench.connect import is_url
from accelbench.errors import AccelbenchError
from accelbench.frozen import Frozen
from accelbench.launch import CELL_DIR

_TIME = re.compile(r"^(?:\d+-)?\d+(?::(\d{2}))?(?::(\d{2}))?$")
"""minutes, MM:SS, HH:MM:SS or D-HH:MM:SS (and D-HH, D-HH:MM); groups: the last two fields."""
_NAME = r"^[\w.,+-]+$"
"""A partition, account or job name: letters, digits and . , + - _ only (no line breaks,
spaces or quotes, which would write a shell line or a directive into the script)."""


class JobSpec(Frozen):
    """The allocation a job script asks Slurm for."""

    nodes: int = Field(gt=0, le=100_000)
    gpus_per_node: int = Field(ge=0, le=64)
    """GPUs on each node (0 for a CPU-only partition)."""
    cpus_per_node: int | None = Field(default=None, gt=0, le=100_000)
    time: str = "01:00:00"
    """Time limit in Slurm's notation: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS."""
    partition: str | None = Field(default=None, pattern=_NAME)
    account: str | None = Field(default=None, pattern=_NAME)
    job_name: str = Field(default="accelbench", pattern=_NAME)

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, time: str) -> str:
        match = _TIME.match(time)
        if not match or any(int(part) > 59 for part in match.group(1, 2) if part) or time == "0":
            raise ValueError(
                f"{time!r} is not a Slurm time limit: write e.g. 90, 01:30:00 or 1-00:00:00"
            )
        return time


def script(job: JobSpec, run_args: list[str], db: Path | str, db_file: Path | None = None) -> str:
    """The sbatch script that runs `accelbench run_args...` into the database `db`; with
    `db_file`, the script reads the database's URL from that file (see write_private) into
    $ACCELBENCH_DB, so no password is on a command line, where ps shows it on every node."""
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
    command = shlex.join([sys.executable, "-m", "accelbench", *run_args])
    if db_file is not None:
        database = f'export ACCELBENCH_DB="$(< {shlex.quote(str(db_file.resolve()))})"'
    else:
        db_arg = str(db) if is_url(db) else str(Path(db).resolve())
        database, command = "", command + " --db " + shlex.quote(db_arg)
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
            *([database] if database else []),
            command,
            "",
        ]
    )


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (0600), from the moment it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file of that name keeps its mode otherwise
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


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
