"""The engine seam: what a measurement asks of a framework, in no framework's terms.

A framework is an engine plug-in, described here (torch-free, jax-free) and implemented in a
folder of its own. Its `Device` synchronises, times steps and reads peak memory on its own
device; the scenarios' shared kit (scenarios/epochs.py: the epochs, the steady state, the energy
and host meters, the record) takes that `Device` and the items of a step, so a framework's
measure is a loop of its own steps around the same kit, and its cells are judged, stored,
compared and reported as every other cell.

torch is the default engine: its measures are the scenarios' own (Scenario.measure). Another
engine names its measure for each scenario it can run, the workloads it has and the precisions
it runs in; a cell outside those is refused before anything runs, in one line.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from accelbench import workloads
from accelbench.errors import AccelbenchError
from accelbench.scenarios.base import resolve

if TYPE_CHECKING:
    from accelbench.records.metrics import Metrics
    from accelbench.records.spec import RunSpec

TimerMethod = Literal["device-events", "wall-clock"]


class Timer(Protocol):
    """Intervals between marks, with no wait for the device at each: only `intervals_ms` (at a
    window's edge) waits for the device to finish."""

    method: TimerMethod

    def mark(self, pending: object = None) -> None:
        """A step boundary; `pending` is the step's output, for an engine whose timer waits
        for the step before it (torch's device events ignore it)."""
        ...

    def intervals_ms(self) -> list[float]:
        """Milliseconds between consecutive marks since the last call; waits for the device."""
        ...


class Place(Protocol):
    """Which device: what the energy and host meters read (NVML, RAPL) to find it; a
    torch.device is one."""

    @property
    def type(self) -> str:
        """ "cpu", "cuda", ..."""
        ...

    @property
    def index(self) -> int | None: ...


class Device(Place, Protocol):
    """A framework's device as the measurement sees it."""

    def synchronize(self) -> None:
        """Wait until every piece of work queued on the device has finished."""
        ...

    def timer(self) -> Timer: ...

    def reset_peak_memory(self) -> None: ...

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        """(allocated, reserved) peaks since the last reset; None where the device has none."""
        ...


class WallTimer:
    """Intervals between marks on the host's clock: exact where the work is done by the time a
    mark is made (torch on a CPU; a client whose requests have ended)."""

    method: TimerMethod = "wall-clock"

    def __init__(self) -> None:
        self._times: list[float] = []

    def mark(self, pending: object = None) -> None:
        self._times.append(time.perf_counter())

    def intervals_ms(self) -> list[float]:
        times, self._times = self._times, []
        return [(b - a) * 1e3 for a, b in itertools.pairwise(times)]


@dataclass(frozen=True)
class Host:
    """The host itself as the device of a scenario that drives none of its own (serve's client
    of a server): the meters read its CPUs, nothing is queued, there is no device memory."""

    type: str = "cpu"
    index: int | None = None

    def synchronize(self) -> None:
        """Nothing to wait for: the host's work is done as each call returns."""

    def timer(self) -> WallTimer:
        return WallTimer()

    def reset_peak_memory(self) -> None:
        """No device memory to reset."""

    def peak_memory_gib(self) -> tuple[float | None, float | None]:
        return None, None


HOST = Host()


class LaggedTimer:
    """Intervals between the ends of steps on the host's clock, for an engine that dispatches
    steps asynchronously and has no device events (JAX, TensorFlow).

    A mark waits for the step before the one just dispatched, so one step stays queued and the
    device never drains, and `intervals_ms` waits for the window's last step; the first interval
    runs from the window's first mark to its first step's end. A step the device says is done
    as its dispatch returns (TensorFlow's on a CPU runs as it is called) ends at its own mark.
    Once a window has shown steps shorter than SPAN_MS, marks wait only every `stride` steps
    (enough steps to last SPAN_MS), and each step of a stride is given the stride's mean. The
    first window (the compilation, and the steps it is told apart by) waits at every step."""

    method: TimerMethod = "wall-clock"

    SPAN_MS = 20.0
    """The least time between waits once steps are known to be short. A wait costs tens of
    microseconds of host time (about 30 us on a 2-core CPU, a third of a 0.1 ms step), and on a
    CPU whose cores the step's threads fill it costs the step more: JAX's LeNet-5 at batch 32
    (6 ms steps, so a wait at each) ran at 0.955-0.991 of its bare loop (median 0.984) in five
    runs of benchmarks/jax_bare.py --steps 100 under a 5 ms span, and at 0.979-1.016 (median
    0.995) in eight under 20 or 50 ms."""

    def __init__(self, device: LaggedDevice) -> None:
        self.device = device
        self.stride = 1
        self._ends: list[tuple[float, int]] = []  # (clock, steps dispatched and finished)
        self._pending: Any = None
        self._dispatched = 0

    def mark(self, pending: object = None) -> None:
        if pending is None:  # a window's first mark: nothing queued yet
            self._ends.append((time.perf_counter(), self._dispatched))
            return
        self.device.latest = pending
        if self.device.done(pending):  # it ran as it was dispatched: it ends now
            self._pending = None
            self._dispatched += 1
            if self._dispatched - self._ends[-1][1] >= self.stride:
                self._ends.append((time.perf_counter(), self._dispatched))
            return
        if self._pending is not None and self._dispatched - self._ends[-1][1] >= self.stride:
            self.device.wait(self._pending)
            self._ends.append((time.perf_counter(), self._dispatched))
        self._pending = pending
        self._dispatched += 1

    def intervals_ms(self) -> list[float]:
        if self._pending is not None:
            self.device.wait(self._pending)
            self._pending = None
        if self._ends and self._ends[-1][1] < self._dispatched:
            self._ends.append((time.perf_counter(), self._dispatched))
        ends, self._ends = self._ends, []
        steps = [
            (b - a) * 1e3 / (n - m)
            for (a, m), (b, n) in itertools.pairwise(ends)
            for _ in range(n - m)
        ]
        if steps:
            short = statistics.median(steps)
            self.stride = max(1, math.ceil(self.SPAN_MS / short)) if short > 0 else 1
        return steps


class LaggedDevice:
    """What a device of such an engine shares: it waits for a step by its output (`wait`), keeps
    the last step dispatched, and synchronizes by waiting for that one (a step's output is
    ready once it, and every step before it that it reads, has run)."""

    latest: Any = None
    """The output of the last step dispatched."""

    def wait(self, output: Any) -> None:
        raise NotImplementedError

    def done(self, output: Any) -> bool:
        """Whether the step that made `output` had ended when its dispatch returned (an engine
        that runs a step as it is called): its timer then marks its end at once, rather than
        at the next step's mark, which would give one step two steps' time and the last none."""
        return False

    def synchronize(self) -> None:
        if self.latest is not None:
            self.wait(self.latest)

    def timer(self) -> LaggedTimer:
        return LaggedTimer(self)


@dataclass(frozen=True)
class Framework:
    """An engine plug-in: which cells it can measure, and the measure for each scenario."""

    name: str
    summary: str
    measures: Mapping[str, str] = field(default_factory=dict)
    """Scenario name -> "module:function", a `measure(spec) -> Metrics` run in the cell's
    process; empty for torch, whose measures are the scenarios' own."""
    workloads: tuple[str, ...] = ()
    """The workloads it builds (their names in the torch registry: the same model from the same
    config); empty: every workload."""
    user_models: str = ""
    """Where the contract of a user's model for it (`file.py:function`) is shown; empty: it
    takes none."""
    precisions: tuple[str, ...] = ()
    """The precisions it runs in; empty: every precision."""
    rules: Callable[[RunSpec], None] | None = None
    """Its own refusals of a spec (ValueError with the fix), after the lists above."""

    def check(self, spec: RunSpec) -> None:
        """Refuse, in one line naming the fix, a cell this engine cannot measure."""
        if not self.measures:
            return
        name = self.name
        if spec.scenario not in self.measures:
            raise ValueError(
                f"--framework {name} measures {', '.join(self.measures)}, not "
                f"{spec.scenario}: give --framework torch"
            )
        user = bool(self.user_models) and workloads.is_user(spec.workload)
        if self.workloads and spec.workload not in self.workloads and not user:
            mine = f"{', '.join(self.workloads)}" + (" and user models" if self.user_models else "")
            raise ValueError(
                f"--framework {name} builds {mine}, not {spec.workload}: give --framework torch"
            )
        if self.precisions and spec.precision not in self.precisions:
            raise ValueError(
                f"--framework {name} runs in {', '.join(self.precisions)}, not "
                f"{spec.precision}: give --precision one of those"
            )
        if self.rules is not None:
            self.rules(spec)

    def measure_fn(self, scenario: str) -> Callable[[RunSpec], Metrics]:
        """The measure of a scenario under this engine, its module imported now (a missing
        framework is a cell's error naming its extra, errors.EXTRAS)."""
        return resolve(self.measures[scenario])


def one_device(
    name: str,
    spec: RunSpec,
    lacks: Mapping[str, bool],
    replicas: bool = False,
    reads_data: bool = False,
) -> None:
    """The rules an engine besides torch has so far: one process (or, where it has `replicas`,
    data-parallel replicas, a process each), on a CPU or a CUDA GPU, none of the options no such
    engine has built yet (--data but where it `reads_data`: a built-in workload's records, which
    the torch workload reads), and none it lacks itself (`lacks`: each option with whether the
    spec gives it)."""
    sharded = spec.fsdp or spec.tensor_parallel > 1 or spec.pipeline_stages > 1
    if sharded or (spec.distributed and not replicas):
        raise ValueError(
            f"--framework {name} runs "
            + (
                "data-parallel replicas only: leave out --fsdp"
                if replicas
                else "one process so far: leave out --replicas, --fsdp"
            )
            + ", --tensor-parallel and --pipeline-stages"
        )
    if spec.device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"--framework {name} runs on cpu or cuda, not {spec.device}")
    unbuilt = {
        "--data (a built-in workload's records)": spec.data is not None
        and (not reads_data or workloads.is_user(spec.workload)),
        "--workers": spec.workers != 0,
        "--grad-accum": spec.grad_accum > 1,
        "--recompute": spec.recompute,
        "--lora-rank": spec.lora_rank is not None,
        "--model-arg (a user's model takes them)": bool(spec.model_args)
        and not workloads.is_user(spec.workload),
    }
    given = [option for option, on in {**lacks, **unbuilt}.items() if on]
    if given:
        raise ValueError(f"--framework {name} takes none of these so far: leave out {given[0]}")


M = TypeVar("M")


def user_model(name: str, model_args: Mapping[str, Any] | None, kind: type[M], framework: str) -> M:
    """A user's `file.py:function` called with the model args, which must return the engine's
    model class `kind`; AccelbenchError naming the contract otherwise."""
    model = workloads.user_function(name)(**(model_args or {}))
    if not isinstance(model, kind):
        contract = get(framework).user_models
        raise AccelbenchError(
            f"{name} returned {type(model).__name__}; under --framework {framework} it must "
            f"return an {kind.__module__}.{kind.__name__} (see {contract})"
        )
    return model


TORCH = Framework("torch", "PyTorch, eager or torch.compile: every scenario, workload and layout")

BUILT_IN = ("accelbench.engines.jax", "accelbench.engines.tensorflow")
"""The engine plug-ins besides torch: modules that each define a FRAMEWORK."""

_REGISTRY: dict[str, Framework] = {}


def _registry() -> dict[str, Framework]:
    if not _REGISTRY:
        import importlib

        found = [TORCH, *(importlib.import_module(m).FRAMEWORK for m in BUILT_IN)]
        _REGISTRY.update((f.name, f) for f in found)
    return _REGISTRY


def names() -> list[str]:
    return list(_registry())


def get(name: str) -> Framework:
    try:
        return _registry()[name]
    except KeyError:
        raise AccelbenchError(
            f"unknown framework {name!r}: give --framework {' or '.join(names())}"
        ) from None
