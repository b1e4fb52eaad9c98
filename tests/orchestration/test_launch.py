from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import psutil
import pytest

from accelbench.cell import child
from accelbench.cell.environment import capture
from accelbench.errors import AccelbenchError
from accelbench.orchestration import exits, forks, launch
from accelbench.records.environment import Environment
from accelbench.records.result import Result

from ..conftest import ctrl_c_reaches, on_a_terminal, tiny


@pytest.fixture(scope="module")
def env() -> Environment:
    return capture("cpu")


def test_probe_matches_capture_in_process(env: Environment) -> None:
    assert launch.probe_environment("cpu").fingerprint() == env.fingerprint()


def test_probe_of_a_missing_device_is_a_clear_error() -> None:
    with pytest.raises(AccelbenchError, match="no cuda device is available"):
        launch.probe_environment("cuda")


def test_cell_runs_in_a_child_and_reports_overhead(env: Environment) -> None:
    result = launch.run_in_child(tiny(), env, timeout_s=120)
    assert result.status == "ok"
    assert result.metrics is not None and result.wall_s is not None
    assert result.overhead_s is not None and 0 < result.overhead_s < result.wall_s


def test_a_cell_tells_each_phase_as_it_begins(env: Environment) -> None:
    phases: list[str] = []
    result = launch.run_in_child(tiny(epochs=3), env, timeout_s=120, on_phase=phases.append)
    assert result.status == "ok"
    assert phases == [
        "building the model",
        "epoch 1 of 3 (warm-up and compilation)",
        "epoch 2 of 3",
        "epoch 3 of 3",
    ]


def test_the_sweep_shows_its_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """The cell in flight, its phase and the cells done, on a terminal (a pseudo-terminal
    here); nothing of it where the output goes to a file."""
    command = [sys.executable, "-m", "accelbench", "run", "tiny_mlp", "--epochs", "3"]
    command += ["--steps-per-epoch", "3000", "--device", "cpu", "--db", str(tmp_path / "r.db")]
    code, text = on_a_terminal(command)
    assert code == 0
    assert "tiny_mlp bs=8 fp32: epoch 2 of 3" in text and "/1 cells" in text
    command[command.index("3000")] = "30"  # a cell of its own: nothing to wait for in a file
    piped = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "samples/s" in piped.stdout + piped.stderr
    assert "epoch 2 of 3" not in piped.stdout + piped.stderr
    assert "/1 cells" not in piped.stdout + piped.stderr
    assert "\n\n" not in piped.stderr  # no empty line where a progress line would have been


def test_cell_past_its_limit_is_a_timeout(
    env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "_GRACE_S", 2.0)  # its polite stop would wait for the epoch end
    spec = tiny(workload="autoencoder", batch_size=64, steps_per_epoch=1000)
    result = launch.run_in_child(spec, env, timeout_s=1.0)
    assert result.status == "timeout"
    assert result.reason == "no result within the 1 s limit"


def test_cell_that_dies_without_a_result_is_an_error(env: Environment) -> None:
    # The child cannot open a CUDA device here, so it exits without writing a result.
    result = launch.run_in_child(tiny(device="cuda"), env, timeout_s=120)
    assert result.status == "error"
    assert result.reason == "no cuda device is available here; use --device cpu or auto"


def test_how_a_cell_without_a_result_ended() -> None:
    status = exits.status
    assert status(-9, "", oom_killed=True)[0] == "oom"
    killed = status(-9, "", oom_killed=False)
    assert killed[0] == "interrupted" and "run the sweep again" in killed[1]  # retried next run
    assert status(-11, "", oom_killed=False) == ("error", "cell process killed by SIGSEGV")
    assert status(1, "line\nValueError: boom\n", False) == ("error", "ValueError: boom")
    assert status(1, "exitcode  : -9 (pid: 7)\n======\n", False)[1] == "exitcode  : -9 (pid: 7)"
    assert status(0, "a line the model printed", False)[1].startswith(
        "cell process exited with code 0 and no result: does the model's code end the process"
    )


def test_interrupting_the_launcher_kills_the_cell(tmp_path: Path) -> None:
    spec = tiny(workload="autoencoder", batch_size=64, steps_per_epoch=1000)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    code = (
        "import pathlib; from accelbench.orchestration import launch; from accelbench.cell.environment import capture;"
        "launch._GRACE_S = 2.0;"  # the cell is past it: a kill, not its polite stop, ends it
        "from accelbench.records.spec import RunSpec;"
        f"spec = RunSpec.model_validate_json(pathlib.Path({str(spec_file)!r}).read_text());"
        "launch.run_in_child(spec, capture('cpu'), timeout_s=600)"
    )
    launcher = subprocess.Popen(
        [sys.executable, "-c", code], stderr=subprocess.DEVNULL, preexec_fn=ctrl_c_reaches
    )
    deadline = time.monotonic() + 60
    cells: list[psutil.Process] = []
    while not cells and time.monotonic() < deadline:
        time.sleep(0.2)
        cells = psutil.Process(launcher.pid).children(recursive=True)
    assert cells, "the launcher never started its cell"
    time.sleep(5)  # let the cell get past reading its spec, so only a kill can stop it
    launcher.send_signal(signal.SIGINT)  # what Ctrl-C sends
    launcher.wait(timeout=120)  # a loaded host is slow to stop, not wrong
    assert launcher.returncode != 0
    assert not [c for c in cells if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


def test_command_per_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    cell = ["/cells/abc/spec.json", "/cells/abc/result.json"]
    one = launch.command(tiny(), cell)
    assert one == [sys.executable, "-m", "accelbench.cell.child", "cell", *cell]
    local = launch.command(tiny(replicas=4, numa_binding="node"), cell)
    assert local[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert local[3:] == [
        "--nproc-per-node",
        "4",
        "--numa-binding",
        "node",
        "--standalone",
        # forked by torchrun from its own process, which has the cell's imports (cell server)
        "--run-path",
        "--start-method",
        "fork",
        str(Path(child.__file__)),
        "cell",
        *cell,
    ]
    monkeypatch.setattr(launch.socket, "gethostname", lambda: "node001")
    multi = launch.command(tiny(replicas=8, nodes=2), cell)
    assert multi[:6] == ["srun", "--nodes", "2", "--ntasks-per-node", "1", "--kill-on-bad-exit=1"]
    assert multi[multi.index("--nproc-per-node") + 1] == "4"
    assert multi[multi.index("--nnodes") + 1] == "2"
    assert multi[multi.index("--rdzv-endpoint") + 1].startswith("node001:")
    assert multi[multi.index("--rdzv-id") + 1] == "abc"
    assert multi[-6:] == ["--start-method", "fork", str(Path(child.__file__)), "cell", *cell]
    monkeypatch.setenv(forks.SWITCH, "0")  # every cell and rank afresh, should a fork not do
    assert launch.command(tiny(replicas=2), cell)[-5:] == [*forks.CHILD, "cell", *cell]


def test_a_failing_rank_is_the_result_and_stops_the_others(
    env: Environment, tmp_path: Path
) -> None:
    model = tmp_path / "rank_one_fails.py"
    model.write_text(
        "import os\n"
        "from accelbench.workloads.toy import tiny_mlp\n"
        "def build():\n"
        "    if os.environ['RANK'] == '1':\n"
        "        raise RuntimeError('rank 1 cannot build its model')\n"
        "    return tiny_mlp()\n"
    )
    # Rank 0 would wait for rank 1 at its first gradient exchange until the cell's time limit,
    # were it not stopped: the status would then be "timeout".
    result = launch.run_in_child(tiny(workload=f"{model}:build", replicas=2), env, timeout_s=120)
    assert result.status == "error"
    assert result.reason == "RuntimeError: rank 1 cannot build its model"
    assert result.detail and "rank_one_fails.py" in result.detail


def test_the_first_rank_to_fail_is_the_cells_result(env: Environment) -> None:
    """Rank 0 writes its own failure too when its peer's end breaks a collective (gloo's
    "Connection closed by peer", seen before torchrun stopped it): the earlier failure is
    the cause, whichever rank wrote it."""
    spec = tiny(replicas=2)
    own = Result.new(spec, env, "error", reason="RuntimeError: rank 1 cannot build its model")
    broken = Result.new(spec, env, "error", reason="RuntimeError: Connection closed by peer")
    broken = broken.model_copy(update={"created_at": own.created_at + timedelta(seconds=2)})
    assert launch._first_failure([broken, own]) is own
    assert launch._first_failure([own, broken]) is own
    ok = Result.new(spec, env, "ok")
    assert launch._first_failure([ok]) is ok
    assert launch._first_failure([ok, own]) is own


TORCHRUN_REPORT = """Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 9324)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-27_06:42:04
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 9325)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 9325
============================================================
"""


def test_the_rank_torchrun_found_killed_first_is_read_from_its_report() -> None:
    assert exits.rank_killed(TORCHRUN_REPORT) == (1, 9)
    assert exits.rank_killed(TORCHRUN_REPORT.replace("-9 (pid", "1 (pid")) is None
    assert exits.rank_killed("ValueError: boom") is None
    # torchrun's own SIGTERM to the survivors of a rank's error is no cause
    stopped = "Failures:\n[1]:\n  rank      : 0 (local_rank: 0)\n  exitcode  : -15 (pid: 1)\n"
    failed = "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n"
    assert exits.rank_killed(stopped + failed + "  exitcode  : 1 (pid: 2)\n") is None
    # a peer's broken collective observed first, the SIGKILLed rank listed among the failures
    broken = TORCHRUN_REPORT.replace("exitcode  : 1 (pid: 9324)", "exitcode  : -9 (pid: 9324)")
    assert exits.rank_killed(broken.replace("-9 (pid: 9325)", "1 (pid: 9325)")) == (0, 9)
