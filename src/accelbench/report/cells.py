"""The one way to name a cell in words, and the value formats every report shares."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from accelbench import scenarios
from accelbench.analysis import validity
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec, knobs

SHOWN = frozenset(
    {
        *("workload", "model_args", "data", "workers", "seed", "repeat", "scenario"),
        *("batch_size", "grad_accum", "replicas", "tensor_parallel", "sequence_parallel"),
        *("pipeline_stages", "nodes", "fsdp", "fsdp_offload", "precision", "compile"),
        *("compile_mode", "inputs_on_device", "cudnn_benchmark", "prompt_tokens", "new_tokens"),
        *("lengths", "rate_per_s", "device", "platform", "lora_rank", "framework"),
    }
)
"""Spec fields that label(), configuration() and describe() name, or that the platform names
(device, platform): every other field is a knob that `differing` adds where it differs."""


def label(spec: RunSpec) -> str:
    """The workload with its model args, the data set's name if not synthetic, the loader
    workers, seed and repeat if any."""
    args = ",".join(f"{k}={v}" for k, v in spec.model_args.items())
    text = spec.workload + (f"({args})" if args else "")
    text += f" on {Path(spec.data).name}" if spec.data else ""
    text += f", {spec.workers} workers" if spec.workers else ""
    text += f", seed {spec.seed}" if spec.seed else ""
    return text + (f", repeat {spec.repeat}" if spec.repeat else "")


def configuration(
    spec: RunSpec,
    *,
    batch: bool = True,
    devices: bool = True,
    replicas: bool = True,
    framework: bool = True,
) -> str:
    """How the workload ran: micro batch, accumulation, devices, the framework unless torch,
    precision, compile and the
    input's place (device-input: the compute ceiling, not the host pipeline's rate); without the
    batch, the devices or only the replicas (and nodes) where a figure's axis or a table's
    column shows them, and without the framework where a line names it first."""
    scenario = scenarios.get(spec.scenario)
    if isinstance(
        scenario, scenarios.ClientScenario
    ):  # the server's own settings are not the client's to give
        parts = [f"{spec.batch_size} in flight"] if batch else []
        return " ".join([*parts, *scenario.words(spec)])
    parts = [f"bs={spec.batch_size}", *scenario.words(spec)] if batch else scenario.words(spec)
    parts += [f"accum={spec.grad_accum}"] if spec.grad_accum > 1 else []
    if devices:
        parts += [f"x{spec.replicas} replicas"] if spec.replicas > 1 and replicas else []
        sp = "+sp" if spec.sequence_parallel else ""
        parts += [f"tp={spec.tensor_parallel}{sp}"] if spec.tensor_parallel > 1 else []
        parts += [f"in {spec.pipeline_stages} stages"] if spec.pipeline_stages > 1 else []
        parts += [f"on {spec.nodes} nodes"] if spec.nodes > 1 and replicas else []
    parts += ["fsdp" + ("+offload" if spec.fsdp_offload else "")] if spec.fsdp else []
    parts += [f"lora r{spec.lora_rank}"] if spec.lora_rank else []
    parts += (
        [spec.framework] if framework and spec.framework != "torch" else []
    )  # torch: the default
    parts.append(spec.precision)
    if spec.compile:
        mode = spec.compile_mode
        parts.append("+compile" + ("" if mode == "default" else f"({mode})"))
    parts += ["device-input"] if spec.inputs_on_device else []
    parts += [f"cudnn.benchmark={spec.cudnn_benchmark}"] if spec.cudnn_benchmark != "auto" else []
    return " ".join(parts)


def differing(specs: Iterable[RunSpec], shown: Iterable[str] = SHOWN) -> list[str]:
    """The spec fields, other than those `shown`, whose values differ among `specs`, in the
    spec's order: the knobs (threads, epochs, steps, ...) that tell otherwise alike rows apart.
    Derived from the spec, so a new knob is shown without a report edit."""
    skip = set(shown)
    names = [name for name in knobs() if name not in skip]
    return differing_values(names, (spec.model_dump(mode="json") for spec in specs))


def differing_values(
    names: Iterable[str],
    values: Iterable[Mapping[str, object]],
    defaults: Mapping[str, object] | None = None,
) -> list[str]:
    """The `names` whose values differ among `values` (specs as model_dump(mode="json")
    writes them; a name one lacks holds its value in `defaults`), in the order of `names`."""
    wanted, seen, held, count = set(names), defaultdict(set), Counter[str](), 0
    for value in values:
        count += 1
        for name, v in value.items():
            if name in wanted:
                seen[name].add(_comparable(v))
                held[name] += 1
    for name in wanted if defaults is not None else ():
        if held[name] < count:
            seen[name].add(_comparable(defaults[name]))  # type: ignore[index]
    return [name for name in names if len(seen[name]) > 1]


def _comparable(value: object) -> object:
    """A value as a set member: a scalar as itself with its type (1 and True differ), a list
    or table as its JSON."""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return type(value), value


def knobs_text(values: Mapping[str, object], names: Sequence[str]) -> str:
    """The named knobs' values (a spec's model_dump(mode="json"), or a listing's knobs over
    their defaults), as name=value ("threads=1 epochs=3"; unset: "threads=default")."""
    return " ".join(f"{n}={'default' if values[n] is None else values[n]}" for n in names)


def settings(spec: RunSpec, knobs: Sequence[str] = (), **axes: bool) -> str:
    """configuration() (its keywords: what an axis or column shows) and the values of the
    knobs its scenario has."""
    values = spec.model_dump(mode="json") if knobs else {}
    own = [n for n in knobs if n in values]
    return " ".join(filter(None, [configuration(spec, **axes), knobs_text(values, own)]))


def describe(spec: RunSpec, knobs: Sequence[str] = ()) -> str:
    """The cell in a few words: its label, scenario unless training, configuration and the
    `knobs`' values."""
    default = RunSpec.model_fields["scenario"].default
    scenario = "" if spec.scenario == default else f" {spec.scenario}"
    return f"{label(spec)}{scenario} {settings(spec, knobs)}"


def describer(specs: Iterable[RunSpec]) -> Callable[[RunSpec], str]:
    """describe() for lines about these cells: each names the knobs that differ among them, so
    no two lines about differently set-up cells read alike."""
    knobs = differing(specs)
    return lambda spec: describe(spec, knobs)


def rate_text(items_per_s: float) -> str:
    """Whole numbers with thousands separators; three significant digits below 100."""
    return f"{items_per_s:,.0f}" if items_per_s >= 100 else f"{items_per_s:.3g}"


LAST_EPOCH = "Last epoch (s/items)"
"""The header of last_epoch_text: an epoch here is what the spec says (a few steps, often), not
the paper's pass over 70,000 images, so its size is shown beside its time."""


def last_epoch_text(result: Result) -> str:
    """The time of the result's last epoch and how many items it held."""
    m = result.metrics
    if m is None or not scenarios.get(result.spec.scenario).rated_by_steps:
        return ""  # its epochs are a capacity phase, not what the headline was measured over
    last = m.epochs[-1]
    return f"{last.time_s:.2f} / {last.num_items:,}"


def ci_text(result: Result) -> str:
    """The headline's 95% interval around it, percent: ±x where its two sides agree to the digit
    shown, else +up/-down (a bootstrap interval is often lopsided); blank where there is none,
    or where the steady state drifted (validity.drifting: no interval holds for it)."""
    ci, rate, m = result.items_per_s_ci, result.items_per_s, result.metrics
    if ci is None or not rate:
        return ""
    target = result.spec.ci_pct or validity.NOISY_PCT
    if (
        m
        and scenarios.get(result.spec.scenario).rated_by_steps
        and validity.drifting(m.delivered, target)
    ):
        return ""
    up, down = (f"{100 * abs(bound - rate) / rate:.1f}" for bound in (ci[1], ci[0]))
    return f"±{up}" if up == down else f"+{up}/-{down}"


def mfu_text(result: Result) -> str:
    mfu = result.metrics.mfu if result.metrics else None
    return "" if mfu is None else f"{100 * mfu:.1f}"


def iqr_text(result: Result) -> str:
    """The spread of window throughputs; blank below 4 windows, where quartiles mean little."""
    if result.metrics is None or result.metrics.window_items_per_s.n < 4:
        return ""
    return f"{result.metrics.window_items_per_s.iqr_pct:.1f}"


def wait_text(result: Result) -> str:
    """The share of step time spent waiting for input, in percent; blank if not measured."""
    m = result.metrics
    if m is None or m.input_wait_frac is None:
        return ""
    return f"{100 * m.input_wait_frac:.0f}" if m.input_wait_frac >= 0.01 else "<1"


def shown_invalid(result: Result) -> bool:
    return result.metrics is not None and result.status != "ok"
