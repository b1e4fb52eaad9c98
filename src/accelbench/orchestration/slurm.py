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
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field, field_validator

from accelbench.errors import AccelbenchError
from accelbench.orchestration.launch import CELL_DIR
from accelbench.records.frozen import Frozen
from accelbench.records.spec import RunSpec
from accelbench.storage.connect import is_url

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
    """CPUs to ask for on each node (default: all of them; the job has its nodes to itself)."""
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


NODE_LOCAL = ("/tmp", "/var/tmp", "/dev/shm", "/scratch/local")
"""Folders that are each node's own on a cluster: a database there is not where the user looks."""


def check_allocation(job: JobSpec, specs: Sequence[RunSpec]) -> None:
    """Raise, naming the fix, if a cell of the sweep cannot run on the job's allocation: it
    would wait in the queue and then fail."""
    for spec in specs:
        per_node = spec.processes_per_node
        if spec.nodes > job.nodes:
            raise AccelbenchError(
                f"the sweep asks for {spec.nodes} nodes and the job for {job.nodes}: raise "
                "--nodes of the job"
            )
        devices = job.gpus_per_node or job.cpus_per_node
        if devices and per_node > devices:
            kind = "GPUs" if job.gpus_per_node else "CPUs"
            need = -(-spec.num_processes // devices)
            raise AccelbenchError(
                f"a cell of {spec.num_processes} processes on {spec.nodes} node(s) puts "
                f"{per_node} on a node with {devices} {kind}: give the sweep --nodes {need} "
                f"(and the job at least that), or fewer --replicas or --tensor-parallel"
            )


def database_path(db: Path | str) -> str:
    """The database as the job will name it: a URL as is, a path made absolute (a relative one
    is under the directory the script is written from, where sbatch is run)."""
    return str(db) if is_url(db) else str(Path(db).resolve())


def node_local(db: str) -> bool:
    """Whether the database path is on a node's own disk, not the cluster's shared one."""
    folders = {*NODE_LOCAL, (os.environ.get("TMPDIR") or "/tmp").rstrip("/")} - {""}
    return not is_url(db) and any(db == f or db.startswith(f + "/") for f in folders)


def script(job: JobSpec, run_args: list[str], db: Path | str, db_file: Path | None = None) -> str:
    """The sbatch script that runs `accelbench run_args...` into the database `db`; with
    `db_file`, the script reads the database's URL from that file (secrets.write_private) into
    $ACCELBENCH_DB, so no password is on a command line, where ps shows it on every node."""
    directives = [
        f"--job-name={job.job_name}",
        f"--nodes={job.nodes}",
        "--ntasks-per-node=1",  # one torchrun agent per node, which starts a rank per device
        "--exclusive",  # a benchmark shares its nodes with no other job
        "--mem=0",  # all of each node's memory
        f"--time={job.time}",
        "--output=%x-%j.out",
    ]
    if job.gpus_per_node:
        directives.append(f"--gpus-per-node={job.gpus_per_node}")
    if job.cpus_per_node:  # else --exclusive gives the one task every CPU of the node
        directives.append(f"--cpus-per-task={job.cpus_per_node}")
    if job.partition:
        directives.append(f"--partition={job.partition}")
    if job.account:
        directives.append(f"--account={job.account}")
    command = shlex.join([sys.executable, "-m", "accelbench", *run_args])
    if db_file is not None:
        database = f'export ACCELBENCH_DB="$(< {shlex.quote(str(db_file.resolve()))})"'
    else:
        database, command = "", command + " --db " + shlex.quote(database_path(db))
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
