"""The cell server forks each cell, and nothing a cell does reaches the next."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cell.environment import capture
from accelbench.cli import app
from accelbench.orchestration import forks, launch
from accelbench.report.database import ResultStore

from ..conftest import tiny

LEAKY = """\
import functools, os, signal, sys, types
import torch
import accelbench.workloads as registry
from accelbench import Workload

def step(act, seen, model, batch):
    if not batch['x'].is_meta:  # in the cell, not in the pre-flight
        act_out(act, seen)
    return model(batch['x']).sum()

def act_out(act, seen):
    if act == 'leak':  # every kind of process-wide state a cell can change
        torch.set_float32_matmul_precision('medium')
        torch.backends.cudnn.deterministic = True
        os.environ['ACCELBENCH_LEAKED'] = '1'
        registry.LEAKED = True  # a module the cell server has imported
        sys.modules['leaked_module'] = types.ModuleType('leaked_module')
        if torch.cuda.is_available():
            torch.cuda.init()
    elif act == 'die':  # as the out-of-memory killer ends a cell
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        leaked = {
            'matmul precision': torch.get_float32_matmul_precision() != 'highest',
            'cudnn flag': torch.backends.cudnn.deterministic,
            'environment': 'ACCELBENCH_LEAKED' in os.environ,
            'module global': hasattr(registry, 'LEAKED'),
            'module': 'leaked_module' in sys.modules,
            'CUDA state': torch.cuda.is_initialized(),
        }
        if any(leaked.values()):
            raise RuntimeError('leaked: ' + ', '.join(k for k, v in leaked.items() if v))
        with open(seen, 'w') as out:  # how this cell's process started: forked, or afresh
            out.write(open('/proc/self/cmdline').read())
            out.write(f' SIGTERM default: {signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}')

def build(act='check', seen=''):
    return Workload(
        'items',
        lambda: torch.nn.Linear(4, 2),
        lambda g: {'x': torch.randn(4)},
        functools.partial(step, act, seen),
    )
"""


def test_nothing_a_cell_does_reaches_the_next(tmp_path: Path) -> None:
    model, seen, db = tmp_path / "leaky.py", tmp_path / "seen", tmp_path / "r.sqlite"
    model.write_text(LEAKY)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'fixed = {{ workload = "{model}:build", batch_size = 4, epochs = 2, '
        'steps_per_epoch = 4, window_steps = 1, device = "cpu" }\n'
        f'axes = {{ model_args = [{{ act = "leak" }}, {{ act = "die" }}, '
        f'{{ act = "check", seen = "{seen}" }}] }}\n'
    )
    result = CliRunner().invoke(app, ["run", "--sweep", str(sweep), "--db", str(db)])
    assert result.exit_code == 0, result.output
    with ResultStore(db) as store:
        by_act = {r.spec.model_args["act"]: r for r in store.query()}
    assert by_act["leak"].status == "ok"
    assert by_act["leak"].metrics is not None
    assert by_act["leak"].metrics.torch_settings["float32_matmul_precision"] == "medium"
    assert by_act["die"].status == "interrupted"  # killed from outside: run again next time
    assert by_act["check"].status == "ok", by_act["check"].reason
    assert by_act["check"].metrics is not None
    assert by_act["check"].metrics.torch_settings["float32_matmul_precision"] == "highest"
    assert "accelbench.cell.server" in seen.read_text()  # the server forked it: the test holds


def test_cells_start_in_fresh_interpreters_once_the_server_is_gone() -> None:
    with forks.serving():
        server = forks.active()
        assert server is not None
        os.killpg(server._process.pid, signal.SIGKILL)
        server._process.wait()
        result = launch.run_in_child(tiny(steps_per_epoch=2), capture("cpu"), timeout_s=300)
        assert forks.active() is None
    assert result.status == "ok", result.reason


def test_the_switch_turns_the_server_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(forks.SWITCH, "0")
    with forks.serving():
        assert forks.active() is None
    monkeypatch.setenv(forks.SWITCH, "1")
    with forks.serving():
        outer = forks.active()
        with forks.serving():  # a block inside another shares its server
            assert forks.active() is outer is not None
    assert forks.active() is None


def test_a_probe_forked_by_the_server_names_the_platform() -> None:
    with forks.serving():
        env = launch.probe_environment("cpu")
        assert forks.active() is not None  # the probe was forked: no fall-back marked it broken
    assert env.device_type == "cpu" and "torch" in env.versions


def test_the_next_block_of_the_process_uses_the_same_server_while_it_may(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with forks.serving():
        first = forks.active()
        launch.probe_environment("cpu")
    with forks.serving():  # the Python API called again: torch is not imported again
        assert forks.active() is first is not None
        launch.probe_environment("cpu")
    monkeypatch.setenv("ACCELBENCH_DB", "elsewhere.sqlite")  # read by the sweep, not the server
    with forks.serving():
        assert forks.active() is first
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # read by torch at its import: a new server
    with forks.serving():
        second = forks.active()
        assert second is not None and second is not first
    assert first._process.poll() is not None  # the one it replaced has ended
    second.pending = True  # as if a cell it forked were not waited for
    with forks.serving():
        assert forks.active() is not second


def test_a_server_started_early_serves_the_next_block() -> None:
    forks._close_kept()
    forks.start_early()
    [early] = forks._kept
    forks.start_early()  # one is enough
    assert forks._kept == [early]
    with forks.serving():
        assert forks.active() is early
        launch.probe_environment("cpu")


def test_the_run_command_starts_its_server_before_its_other_imports(tmp_path: Path) -> None:
    # So that the server's import of torch runs beside the command line's own imports.
    code = (
        "import sys\n"
        "from accelbench import command\n"
        "from accelbench.orchestration import forks\n"
        "forks.start_early = lambda: print('before:', sorted({'accelbench.cli', 'torch'} & "
        "set(sys.modules)))\n"
        "sys.argv = ['accelbench', 'run', 'tiny_mlp', '--dry-run', '--db', sys.argv[1]]\n"
        "command.main()\n"
    )
    db = str(tmp_path / "r.sqlite")
    done = subprocess.run(
        [sys.executable, "-c", code, db], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "before: []" in done.stdout and "tiny_mlp" in done.stdout


def test_torchrun_and_the_ranks_it_starts_are_forked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch in the server takes every CPU (2 on CI); torchrun gives each rank one
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    model, seen, db = tmp_path / "leaky.py", tmp_path / "seen", tmp_path / "r.sqlite"
    model.write_text(LEAKY)
    args = ["run", f"{model}:build", "--model-arg", "act=check", "--model-arg", f"seen={seen}"]
    args += ["--replicas", "2", "--batch-size", "4", "--epochs", "2", "--steps-per-epoch", "4"]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--db", str(db)])
    assert result.exit_code == 0, result.output
    with ResultStore(db) as store:
        (cell,) = store.query()
    assert cell.status == "ok" and cell.metrics is not None and len(cell.metrics.ranks) == 2
    # Forked by torchrun's agent, which the server forked: the server's command line.
    assert "accelbench.cell.server" in seen.read_text()
    assert cell.env.torch_num_threads == 1  # as a rank started afresh would read it
    assert "SIGTERM default: True" in seen.read_text()  # not torchrun's, which raises
