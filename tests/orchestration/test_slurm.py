from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli import app

FAKE_SLURM = Path(__file__).parents[1] / "fake_slurm"
runner = CliRunner()


def write_script(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "job.sbatch"
    result = runner.invoke(
        app, ["slurm", "--out", str(out), "--db", str(tmp_path / "r.sqlite"), *args]
    )
    return result.exit_code, result.output, out


def test_a_sharded_llm_sweep_is_scripted_with_its_knobs(tmp_path: Path) -> None:
    knobs = ["--fsdp", "--replicas", "4", "--tensor-parallel", "2", "--nodes", "2"]
    code, output, out = write_script(
        tmp_path, "--nodes", "2", "--gpus-per-node", "4", "--", "run", "llama3_1_8b", *knobs
    )
    assert code == 0, output
    assert " ".join(knobs) in out.read_text()


def test_script_asks_for_the_allocation_and_runs_the_sweep(tmp_path: Path) -> None:
    code, output, out = write_script(
        tmp_path,
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--time",
        "02:00:00",
        "--partition",
        "gpu",
        "--account",
        "proj1",
        "--",
        "run",
        "resnet50",
        "--replicas",
        "4,8",
        "--nodes",
        "2",
    )
    assert code == 0, output
    assert output.endswith(f"\nwrote {out}; results go to {tmp_path / 'r.sqlite'}\n")
    text = out.read_text()
    subprocess.run(["bash", "-n", str(out)], check=True)  # valid shell
    for directive in (
        "--nodes=2",
        "--ntasks-per-node=1",
        "--exclusive",
        "--mem=0",
        "--gpus-per-node=4",
        "--time=02:00:00",
        "--partition=gpu",
        "--account=proj1",
    ):
        assert f"#SBATCH {directive}\n" in text
    assert "export TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in text
    assert 'ACCELBENCH_CELL_DIR="${SLURM_SUBMIT_DIR:-$PWD}/.accelbench-cells"' in text
    last = text.strip().splitlines()[-1]
    assert last.endswith(
        f"-m accelbench run resnet50 --replicas 4,8 --nodes 2 --db {tmp_path / 'r.sqlite'}"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "2"], "give the sweep after --"),
        (
            ["--nodes", "2", "--", "run", "resnet50", "--replicaz", "2"],
            "No such option: --replicaz",
        ),
        (
            ["--nodes", "1", "--", "run", "resnet50", "--replicas", "2", "--nodes", "2"],
            "raise --nodes of the job",
        ),
        (
            ["--nodes", "1", "--time", "2h", "--", "run", "resnet50"],
            "'2h' is not a Slurm time limit",
        ),
        (["--nodes", "1", "--time", "99:99:99", "--", "run", "resnet50"], "not a Slurm time"),
        (["--nodes", "1", "--partition", "gpu\nrm -rf ~", "--", "run", "resnet50"], "--partition"),
        (["--nodes", "1", "--", "run", "resnet50", "--batch-size", "0"], "--batch-size"),
        (["--nodes", "1", "--", "run", "nosuch"], "unknown workload 'nosuch'"),
        (["--nodes", "1", "--", "run", "resnet50", "--timeout-s", "0"], "positive number"),
        (["--nodes", "1000000000000000000", "--", "run", "resnet50"], "--nodes"),
        (["--nodes", "1", "--", "run", "resnet50", "--db", "x"], "give the database once"),
        (["--nodes", "1", "--", "run", "resnet5O"], "unknown workload 'resnet5O'"),
        (
            [
                "--nodes",
                "2",
                "--gpus-per-node",
                "4",
                "--",
                "run",
                "resnet50",
                "--replicas",
                "16",
                "--nodes",
                "2",
            ],
            "a cell of 16 processes on 2 node(s) puts 8 on a node with 4 GPUs: give the sweep "
            "--nodes 4",
        ),
        (
            ["--nodes", "2", "--gpus-per-node", "4", "--", "run", "resnet50", "--replicas", "8"],
            "puts 8 on a node with 4 GPUs: give the sweep --nodes 2",
        ),
        (
            ["--nodes", "1", "--", "run", "timm/resnet18", "--model-arg", "imagesize=64"],
            "unexpected keyword argument 'imagesize'",
        ),
        (  # a tensor-parallel group's devices count: 2 replicas x 4 = 8 on a node of 4
            [
                "--nodes",
                "1",
                "--gpus-per-node",
                "4",
                "--",
                "run",
                "llama3_tiny",
                "--fsdp",
                "--replicas",
                "2",
                "--tensor-parallel",
                "4",
            ],
            "a cell of 8 processes on 1 node(s) puts 8 on a node with 4 GPUs",
        ),
    ],
)
def test_bad_job_requests_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    code, output, out = write_script(tmp_path, *args)
    assert code == 2
    assert message in output and output.count("\n") == 1
    assert not out.exists()


def test_submit_hands_the_script_to_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKE_SLURM}:{os.environ['PATH']}")
    code, output, out = write_script(tmp_path, "--nodes", "1", "--submit", "--", "run", "tiny_mlp")
    assert code == 0 and "Submitted batch job 42" in output
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm here
    code, output, out = write_script(tmp_path, "--nodes", "1", "--submit", "--", "run", "tiny_mlp")
    assert code == 2 and "sbatch not found: run this on a Slurm login node" in output
    assert out.exists()  # written, so it can be submitted by hand


def test_script_runs_a_two_node_cell_through_srun_and_torchrun(tmp_path: Path) -> None:
    """Two torchrun agents on this machine, started by a local stand-in for srun, meet at the
    c10d rendezvous as two nodes would; the batch step stores the cell."""
    code, output, out = write_script(
        tmp_path,
        "--nodes",
        "2",
        "--",
        "run",
        "tiny_mlp",
        "--replicas",
        "2",
        "--nodes",
        "2",
        "--device",
        "cpu",
        "--steps-per-epoch",
        "4",
        "--window-steps",
        "1",
    )
    assert code == 0, output
    env = os.environ | {
        "PATH": f"{FAKE_SLURM}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "7",
        "SLURM_CPUS_ON_NODE": "2",
        "SLURM_SUBMIT_DIR": str(tmp_path),
    }
    job = subprocess.run(["bash", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stdout + job.stderr
    with sqlite3.connect(tmp_path / "r.sqlite") as db:
        (record,) = [json.loads(r) for (r,) in db.execute("SELECT record FROM results")]
    assert record["status"] == "ok"
    assert (record["spec"]["replicas"], record["spec"]["nodes"]) == (2, 2)
    assert [r["rank"] for r in record["metrics"]["ranks"]] == [0, 1]
    assert not list((tmp_path / ".accelbench-cells").iterdir())  # cell files cleaned up


def test_a_database_password_never_enters_the_script(tmp_path: Path) -> None:
    out = tmp_path / "job.sbatch"
    url = "postgresql://bench:Hunter2@db.example/results"
    args = ["slurm", "--out", str(out), "--db", url, "--nodes", "1", "--", "run", "resnet50"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Hunter2" not in out.read_text() and "Hunter2" not in result.output
    secret = tmp_path / "job.sbatch.db-url"
    assert secret.read_text().strip() == url and secret.stat().st_mode & 0o777 == 0o600
    assert f'export ACCELBENCH_DB="$(< {secret})"' in out.read_text()
    subprocess.run(["bash", "-n", str(out)], check=True)


def test_the_database_may_follow_the_sweep_and_a_node_local_one_is_warned_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "job.sbatch"
    args = ["slurm", "--nodes", "1", "--out", str(out), "--", "run", "resnet50"]
    result = runner.invoke(app, [*args, "--db", "results/r.sqlite"])
    assert result.exit_code == 0, result.output
    where = tmp_path / "results" / "r.sqlite"  # resolved where sbatch is run, and said
    assert result.output.endswith(f"wrote {out}; results go to {where}\n")
    assert out.read_text().strip().endswith(f"run resnet50 --db {where}")
    result = runner.invoke(app, [*args, "--db=/tmp/r.sqlite"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "warning: /tmp/r.sqlite is on the batch node's own disk, which other nodes and the login "
        "node do not see: give --db a path on the shared file system\n"
    )


def test_a_tmpdir_of_slash_does_not_make_every_path_node_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from accelbench.orchestration import slurm

    monkeypatch.setenv("TMPDIR", "/")
    assert not slurm.node_local("/home/me/results.sqlite")
    assert slurm.node_local("/tmp/results.sqlite")
