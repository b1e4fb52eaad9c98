from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from accelbench import scenarios
from accelbench.cli.options import ENV_DEFAULTS
from accelbench.records.contention import HostActivity
from accelbench.records.result import Result, result_key
from accelbench.records.spec import RunSpec
from accelbench.records.throughput import Delivered


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test touches the user's database, and torch's global state and the registered
    scenarios are the same for each."""
    monkeypatch.setenv("ACCELBENCH_DB", str(tmp_path / "default.sqlite"))
    monkeypatch.setenv("ACCELBENCH_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # tests outside an allocation, even in one
    for label in ENV_DEFAULTS["platform"]:  # results unlabelled unless a test labels them
        monkeypatch.delenv(label, raising=False)
    flags = (
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
        torch.backends.cudnn.rnn.fp32_precision,  # type: ignore[attr-defined]
    )
    threads = torch.get_num_threads()
    registered = dict(scenarios._REGISTRY), set(scenarios._modules), list(scenarios._loaded)
    torch.manual_seed(0)
    yield
    scenarios._REGISTRY.clear()
    scenarios._REGISTRY.update(registered[0])
    scenarios._modules.clear()
    scenarios._modules.update(registered[1])
    scenarios._loaded[:] = registered[2]
    (
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.cudnn.conv.fp32_precision,  # type: ignore[attr-defined]
        torch.backends.cudnn.rnn.fp32_precision,  # type: ignore[attr-defined]
    ) = flags
    torch.set_num_threads(threads)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


def quick(steps: int = 4, device: str | None = "cpu") -> list[str]:
    """A quick cell's options on the command line: two epochs of `steps` steps, exactly (tests
    count them), windows of a step, on `device` (None: the default)."""
    args = ["--epochs", "2", "--steps-per-epoch", str(steps), "--window-steps", "1"]
    return [*args, "--min-steady-s", "0", *(["--device", device] if device else [])]


def tiny(**overrides: object) -> RunSpec:
    """A spec that runs in a fraction of a second on a CPU: exactly its epochs, which tests
    count (no more until the steady state lasts min_steady_s)."""
    fields: dict[str, object] = {
        "workload": "tiny_mlp",
        "batch_size": 4,
        "epochs": 2,
        "steps_per_epoch": 4,
        "window_steps": 1,
        "min_steady_s": 0.0,
        "device": "cpu",
    }
    return RunSpec.model_validate(fields | overrides)


def rate(items_per_s: float, spread: float | None = 0.01, blocks: int = 12) -> Delivered:
    """A delivered rate of `items_per_s` known to +-spread (None: no interval), over `blocks`
    equal blocks of at least 100 items and a tenth of a second each (a steady state long enough
    for a CPU reading): a constructed headline for tests of what reads it."""
    per_block = max(100, round(items_per_s / 10))
    time_s = blocks * per_block / items_per_s
    return Delivered(
        items_per_s=items_per_s,
        ci_low=None if spread is None else items_per_s * (1 - spread),
        ci_high=None if spread is None else items_per_s * (1 + spread),
        num_items=blocks * per_block,
        time_s=time_s,
        block_items=[per_block] * blocks,
        block_s=[time_s / blocks] * blocks,
    )


def with_rate(result: Result, items_per_s: float, spread: float | None = 0.01) -> Result:
    """`result` with its headline set to `items_per_s` +-spread, on a quiet host."""
    assert result.metrics is not None
    metrics = result.metrics.model_copy(
        update={"delivered": rate(items_per_s, spread), "host": None}
    )
    return result.model_copy(update={"metrics": metrics})


def records_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of every record a ResultStore reads from now on, as its records() calls read
    them: what a test of a bounded read counts."""
    from accelbench.report.database import ResultStore

    read: list[str] = []
    records = ResultStore.records

    def counted(store: ResultStore, keys: list[str]) -> list[Result]:
        read.extend(keys)
        return records(store, keys)

    monkeypatch.setattr(ResultStore, "records", counted)
    return read


def ctrl_c_reaches() -> None:
    """preexec_fn of a child that a test sends Ctrl-C (SIGINT): a shell starts a background job
    with SIGINT ignored, its children inherit that, and Python then installs no handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


needs_cuda = pytest.mark.gpu
"""Tests that need a CUDA device carry the `gpu` marker (`pytest -m gpu` runs just them); they
are skipped where there is none."""


def on_a_terminal(command: list[str], timeout_s: float = 120) -> tuple[int, str]:
    """A command's exit code and what it showed, run on a terminal (a pseudo-terminal); one
    still running after `timeout_s` is killed and fails the test, rather than hang the suite."""
    import pty
    import select
    import time

    leader, follower = pty.openpty()
    child = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    shown, deadline = b"", time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([leader], [], [], left)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the last process on it
                break
            if not chunk:
                break
            shown += chunk
        else:
            child.kill()
            pytest.fail(f"{command} was still running after {timeout_s:g} s")
    finally:
        os.close(leader)
    return child.wait(timeout=timeout_s), shown.decode(errors="replace")


LONGEST_FIRST = (
    "test_benchmarks.py",
    "engines/test_tensorflow.py",
    "execution/test_sharding.py",
    "engines/test_jax.py",
    "cell/test_crash_safety.py",
    "orchestration/test_slurm.py",
    "scenarios/test_serve.py",
    "test_workloads.py",
)
"""The files that ran longest (110-230 s each of the suite's 2,070 s of tests here), handed
out first: `--dist loadfile` gives each worker the next file in collection order, and these,
last in it, kept one worker busy after the other had ended (a replay of the measured times:
1,078 s on the busier worker in collection order, 1,036 s longest first)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent

    def rank(item: pytest.Item) -> int:
        where = item.path.relative_to(tests).as_posix()
        return LONGEST_FIRST.index(where) if where in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the other files, and each file's tests, keep their order
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def make_image_folder(root: Path, num_classes: int = 2, per_class: int = 4) -> Path:
    """An ImageFolder tree of small random RGB images of assorted sizes and formats."""
    from PIL import Image

    gen = np.random.default_rng(0)
    for c in range(num_classes):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(per_class):
            pixels = gen.integers(0, 256, (30 + 4 * i, 40, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / f"class{c}" / f"{i}.{'png' if i % 2 else 'jpg'}")
    return root


def make_shards(root: Path, num_shards: int = 2, per_shard: int = 6) -> Path:
    """webdataset shards of JPEG images with their class."""
    import io

    import webdataset as wds
    from PIL import Image

    gen = np.random.default_rng(0)
    root.mkdir(parents=True)
    for s in range(num_shards):
        with wds.TarWriter(str(root / f"shard-{s:03d}.tar")) as sink:
            for i in range(per_shard):
                jpeg = io.BytesIO()
                Image.fromarray(gen.integers(0, 256, (36, 36, 3), dtype=np.uint8)).save(
                    jpeg, "JPEG"
                )
                sink.write(
                    {"__key__": f"{s}-{i}", "jpg": jpeg.getvalue(), "cls": str(i % 3).encode()}
                )
    return root


def make_mnist(root: Path, count: int = 16) -> Path:
    """MNIST-format IDX files: train-images-idx3-ubyte and train-labels-idx1-ubyte."""
    gen = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    images = root / "train-images-idx3-ubyte"
    header = np.array([2051, count, 28, 28], dtype=">i4").tobytes()
    images.write_bytes(header + gen.integers(0, 256, (count, 28, 28), dtype=np.uint8).tobytes())
    labels = np.array([2049, count], dtype=">i4").tobytes() + bytes(i % 10 for i in range(count))
    (root / "train-labels-idx1-ubyte").write_bytes(labels)
    return images


def make_tokens(path: Path, count: int = 4096, vocab: int = 1000) -> Path:
    np.save(path, np.random.default_rng(0).integers(0, vocab, count, dtype=np.int32))
    return path


def _postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server programs, if the server is installed."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server of our own for the session (.ci/run installs the Debian
    package), on a Unix socket in a temporary folder; its database URL."""
    pytest.importorskip("psycopg")
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server installed (.ci/run installs the postgresql package)")
    # Not under pytest's temporary folders, which the server's user could not enter.
    root = Path(tempfile.mkdtemp(prefix="accelbench-postgres-"))
    # The server refuses to run as root: run it as the package's user where we are root.
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(root, "postgres")
    data, port = root / "data", 54000 + os.getpid() % 1000

    def server(*args: str) -> None:
        subprocess.run([*as_user, *args], check=True, capture_output=True, timeout=120)

    server(
        str(bin_dir / "initdb"),
        "-D",
        str(data),
        "-A",
        "trust",
        "-U",
        "accelbench",
        "--no-sync",
        "-E",
        "UTF8",
    )
    options = f"-k {root} -p {port} -c listen_addresses='' -c fsync=off"
    server(
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(root / "log"),
        "-w",
        "start",
    )
    try:
        yield f"postgresql://accelbench@/postgres?host={root}&port={port}"
    finally:
        server(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fresh_postgres(postgres_url: str) -> str:
    """The test server with no accelbench tables in it."""
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as db:
        db.execute("DROP SCHEMA public CASCADE")
        db.execute("CREATE SCHEMA public")
    return postgres_url


BUSY_HOST = HostActivity(
    num_cpus=2,
    cell_cpus=2.0,
    busy_cpus=2.0,
    own_cpus=0.9,
    steal_frac=0.0,
    load_avg_start=3.0,
    load_avg_end=3.0,
    window_s=5.0,
)
"""A steady state beside other work: others kept 1.1 of 2 CPUs busy while the cell needed 2."""


def on_platform(result: Result, name: str | None, factor: float, **spec: object) -> Result:
    """`result` as if measured on platform `name` (None: the same one) with `spec` changed,
    every throughput `factor` times the measured one: a second machine for report tests."""
    env = result.env
    if name is not None:  # an accelerator's platform: one process per device, not per core
        devices = [d.model_copy(update={"name": name}) for d in env.devices]
        env = env.model_copy(
            update={"hostname": f"{name} host", "devices": devices, "device_type": "cuda"}
        )
    m = result.metrics
    assert m is not None
    w, d = m.window_items_per_s, m.delivered
    scaled = {k: v * factor for k, v in w.model_dump().items() if k != "n" and v is not None}
    rates = {
        k: getattr(d, k) * factor for k in ("items_per_s", "ci_low", "ci_high") if getattr(d, k)
    }
    delivered = d.model_copy(
        update=rates | {"time_s": d.time_s / factor, "block_s": [b / factor for b in d.block_s]}
    )
    epochs = [
        e.model_copy(update={"items_per_s": e.items_per_s * factor, "time_s": e.time_s / factor})
        for e in m.epochs
    ]
    metrics = m.model_copy(
        update={
            "window_items_per_s": w.model_copy(update=scaled),
            "delivered": delivered,
            "epochs": epochs,
            "host": None,
        }
    )
    new_spec = result.spec.model_copy(update=spec)
    return result.model_copy(
        update={"env": env, "spec": new_spec, "metrics": metrics, "key": result_key(new_spec, env)}
    )


def _with_peak(result: Result) -> Result:
    """`result` with a datasheet peak of 1 TFLOP/s, as an accelerator has (a CPU has none)."""
    assert result.metrics is not None and result.metrics.flops is not None
    flops = result.metrics.flops.model_copy(
        update={"peak_per_s": 1e12, "peak_source": "datasheet: simulated"}
    )
    return result.model_copy(update={"metrics": result.metrics.model_copy(update={"flops": flops})})


SIM_PLATFORM = "Sim <script>document.title='pwned'</script> IPU"
"""A simulated platform whose name is markup: reports must show it as text."""


@pytest.fixture(scope="session")
def two_platforms() -> list[Result]:
    """Training at batch 4, 16 and 64 and inference at 4 and 16, measured here; the same cells
    on a simulated second platform (3x, 1.2x and 0.5x as fast); this platform at 2 replicas for
    batch 16 (1.8x); and an out-of-memory cell at batch 256."""
    from accelbench.cell.runner import run

    here = [run(tiny(batch_size=b, steps_per_epoch=12)) for b in (4, 16, 64)]
    here += [run(tiny(scenario="infer", batch_size=b, steps_per_epoch=12)) for b in (4, 16)]
    there = [
        _with_peak(on_platform(r, SIM_PLATFORM, f))
        for r, f in zip(here, (3, 1.2, 0.5, 2, 2), strict=True)
    ]
    oom = Result.new(tiny(batch_size=256), here[0].env, "oom", reason="out of memory (simulated)")
    return [*here, *there, on_platform(here[1], None, 1.8, replicas=2), oom]
