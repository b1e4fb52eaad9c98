"""Advice and tuning in words."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from accelbench.analysis import advice, objectives, scaling, tuning, validity
from accelbench.analysis.advice import Level
from accelbench.analysis.references import Reference
from accelbench.analysis.tally import Out, Run
from accelbench.records.frozen import Frozen
from accelbench.records.result import Result
from accelbench.records.spec import RunSpec
from accelbench.report.answers import Row, plain_row
from accelbench.report.cells import configuration, rate_text


def _objective_text(
    value: float, objective: str, c: objectives.Constraints, devices: int = 1
) -> str:
    if objective == "time-to-train" and c.tokens is not None:
        hours = value * 24 * devices
        return f"{value:.3g} days ({hours:,.0f} device-hours) for {c.tokens:.3g} tokens"
    if objective == "time-to-train":
        return f"{value:.2f} s to target"
    if objective == "energy":
        return f"{value:.3g} J per item"
    if objective == "cost":
        return f"${value:.3g} per million items"
    if objective == "goodput":
        return f"{rate_text(value)} requests/s within the SLO"
    return f"{rate_text(value)} items/s"


def _out_text(why: Out, c: objectives.Constraints, platform: str) -> str:
    match why:
        case Out.CONTENDED:
            return "contended: measured while other work shared the platform"
        case Out.DRIFTING:
            return "drifting: its rate moved through the steady state"
        case Out.GLOBAL_BATCH:
            return f"global batch is not {c.global_batch}"
        case Out.DEVICES:
            return f"more than {c.max_devices} devices"
        case Out.LATENCY:
            return f"p99 latency not known to be within {c.latency_bound_ms:g} ms"
        case Out.MEMORY:
            return f"peak memory leaves under {c.memory_headroom_pct:g}% of the device free"
        case Out.NO_PRICE:
            return f"no price for {platform} in the prices file: add one"
        case Out.SLO:
            return "no rate tried met the SLO"
        case Out.NO_ENERGY:
            return (
                "energy was not measured: no power reading on this platform (NVIDIA GPUs via "
                "NVML, CPUs via RAPL where readable)"
            )


def _scenario(r: Result, objective: str) -> str:
    """The scenario of the answer where the objective reads several (infer, server)."""
    return f"{r.spec.scenario} " if len(objectives.GOALS[objective].scenarios) > 1 else ""


def _confidence_text(confidence: advice.Confidence, best: advice.Option) -> str:
    runner_up = confidence.runner_up
    other = "" if runner_up is None else configuration(runner_up.result.spec)
    fewest = min(len(best.runs), len(runner_up.runs) if runner_up else len(best.runs))
    more = f", or run --repeats {advice.MIN_RUNS}" if fewest < advice.MIN_RUNS else ""
    match confidence.level:
        case Level.HIGH:
            return f"high: its interval clears the runner-up's ({other}), over {fewest}+ runs each"
        case Level.FEW_RUNS:
            runs = "one run" if fewest == 1 else f"{fewest} runs"
            return (
                f"low: {runs}: its interval clears the runner-up's ({other}), but runs in fresh "
                f"processes differ by more than a run's interval says; run --repeats "
                f"{advice.MIN_RUNS} for a sure answer"
            )
        case Level.LOW:
            return f"low: the runner-up ({other}) is within its interval; either will do{more}"
        case Level.ALONE:
            return "one configuration measured: nothing to set it against"
        case Level.NO_INTERVAL:
            return (
                "unknown: the best has no interval (too few steady steps or seeds); run more steps"
            )
        case Level.NO_RUNNER_UP_INTERVAL:
            return "unknown: the runner-up has no interval to set against"


def _spread_text(runs: Sequence[Run]) -> str:
    """The run-to-run spread of the throughput, beside each run's own interval."""
    spread = validity.repeat_spread(runs)
    return "" if spread is None else f"; run-to-run spread {spread:.1f}% of the median"


def _gap_lines(g: advice.Gaps) -> list[str]:
    lines = []
    if g.first_oom is not None:
        largest = "none" if g.largest_fit is None else g.largest_fit
        lines.append(f"largest micro batch that fit: {largest}; out of memory at {g.first_oom}")
    if g.larger_untried:
        lines.append(
            f"micro batches above {g.batch} were not tried and none ran out of memory: the best "
            "may be larger (`accelbench tune` searches them)"
        )
    if g.smaller_untried:
        lines.append(f"micro batches below {g.batch} were not tried")
    if g.no_energy:
        lines.append("energy was not measured on this platform")
    if g.no_memory:
        lines.append("device memory was not measured here, so memory headroom is not checked")
    return lines


def constraints_text(c: objectives.Constraints) -> str:
    parts = [
        f"global batch {c.global_batch}" if c.global_batch else "",
        f"at most {c.max_devices} devices" if c.max_devices else "",
        f"{c.memory_headroom_pct:g}% memory free" if c.memory_headroom_pct else "",
        f"p99 within {c.latency_bound_ms:g} ms" if c.latency_bound_ms is not None else "",
        f"{c.tokens:.3g} tokens" if c.tokens is not None else "",
    ]
    return ", ".join(p for p in parts if p)


def advice_lines(
    found: Sequence[advice.Advice], objective: str, constraints: objectives.Constraints
) -> list[str]:
    """Each platform's answer with its evidence, confidence and gaps; then the platforms set
    against each other where their intervals allow."""
    lines = []
    for i, a in enumerate(found, 1):
        excluded = [
            f"{n} measured run(s): {_out_text(why, constraints, a.platform)}"
            for why, n in a.excluded.items()
        ]
        if not a.options and set(a.excluded) == {Out.NO_ENERGY}:
            lines.append(f"{i}. {a.platform}: energy was never measured here: no answer")
            continue
        if not a.options:
            lines.append(f"{i}. {a.platform}: no configuration meets the objective and constraints")
            lines += [f"   left out: {why}" for why in excluded]
            continue
        best = a.options[0]
        interval = ""
        if best.low is not None and best.high is not None:
            if constraints.tokens is not None:
                interval = f" [{best.low:.3g} to {best.high:.3g} days]"
            else:
                low, high = (
                    _objective_text(v, objective, constraints) for v in (best.low, best.high)
                )
                interval = f" [{low} to {high}]"
        keys = ", ".join(r.key[:8] for r in best.runs)
        lines.append(
            f"{i}. {a.platform}: {_scenario(best.result, objective)}"
            f"{configuration(best.result.spec)}: "
            f"{_objective_text(best.value, objective, constraints, best.result.num_devices)}"
            f"{interval}; from {len(best.runs)} run(s): {keys}{_spread_text(best.runs)}"
        )
        if constraints.tokens is not None:
            lines.append(
                "   projected from training throughput, not measured: it assumes every step of "
                "the job runs at this speed"
            )
        elif objective == "time-to-train":
            reached = sum(1 for r in best.runs if r.status == "ok")
            lines.append(f"   seeds that reached the target: {reached}/{len(best.runs)}")
        if a.confidence is not None:
            lines.append(f"   confidence: {_confidence_text(a.confidence, best)}")
        if a.batch_range:
            span = ", ".join(map(str, a.batch_range))
            lines.append(f"   effective batch range (within 5% of its best throughput): {span}")
        spec = best.result.spec
        if spec.grad_accum > 1 or spec.replicas > 1:
            lines.append(
                f"   global batch {spec.global_batch} = micro batch {spec.batch_size} x "
                f"accumulation {spec.grad_accum} x {spec.replicas} replicas"
            )
        if a.pareto:
            front = "; ".join(
                f"{configuration(o.result.spec)} ({rate_text(o.result.items_per_s or 0)} items/s)"
                for o in a.pareto
            )
            lines.append(
                "   trade-offs (throughput, devices, p99 latency, energy; none beats another on "
                f"all): {front}"
            )
        if a.frameworks:
            each = _frameworks_text(a, objective, constraints)
            lines.append(f"   frameworks, each at its best: {each}")
        lines += [f"   left out: {why}" for why in excluded]
        lines += [f"   not measured: {gap}" for gap in (_gap_lines(a.gaps) if a.gaps else [])]
    ranked = [a.platform for a in found if a.options]
    apart = advice.ranked_apart(found, objective)
    if len(ranked) > 1:
        if apart is None:
            verdict = "not ranked: an interval is missing"
        elif apart:
            verdict = f"{ranked[0]} is best; its interval clears {ranked[1]}'s"
        else:
            verdict = f"{ranked[0]} and {ranked[1]} overlap: not ranked"
        lines.append(f"across platforms: {verdict}")
    return lines


def _frameworks_text(a: advice.Advice, objective: str, constraints: objectives.Constraints) -> str:
    """Each framework's best configuration and its value, and the others' ratio to the best
    framework's (not ranked where the intervals overlap, as a runner-up is not)."""
    first, *others = a.frameworks
    lower = objectives.GOALS[objective].lower_is_better
    parts = [_framework_cell(first, objective, constraints)]
    for o in others:
        ratio = f"{o.value / first.value:.2f}x {first.result.spec.framework}'s"
        clear = advice.clears(first, o, lower)
        if clear is None:
            ratio += ", not ranked: an interval is missing"
        elif not clear:
            ratio += ", not ranked: the intervals overlap"
        parts.append(f"{_framework_cell(o, objective, constraints)} ({ratio})")
    return "; ".join(parts)


def _framework_cell(o: advice.Option, objective: str, constraints: objectives.Constraints) -> str:
    """The option as "jax: bs=32 fp32 22.2 items/s": its framework first, not again among
    the knobs."""
    spec = o.result.spec
    knobs = configuration(spec, framework=False)
    value = _objective_text(o.value, objective, constraints, o.result.num_devices)
    return f"{spec.framework}: {knobs} {value}"


def published_lines(refs: Sequence[Reference]) -> list[str]:
    """advice.published's figures, labelled as published."""
    return [
        f"published, not measured here: {ref.platform} x{ref.num_devices}: {ref.value:,.0f} "
        f"{ref.unit} at micro batch {ref.micro_batch} ({ref.source}, {ref.table})"
        for ref in refs
    ]


def tune_lines(found: tuning.Search, max_batch: int) -> list[str]:
    """What the search found, and what it did not reach."""
    lines = []
    largest, oom = found.largest_fit, found.first_oom
    if largest is None:
        lines.append("no micro batch fitted: even the first ran out of memory or failed")
    elif oom is not None:
        lines.append(f"largest micro batch that fits: {largest} (out of memory at {oom})")
    else:
        lines.append(
            f"largest micro batch tried: {largest}; none ran out of memory up to {max_batch}"
        )
    fastest = found.fastest
    if fastest is not None:
        best = found.trials[fastest]
        near = advice.batch_range(best, list(found.trials.values()))
        unit = best.metrics.item_unit if best.metrics else "items"
        lines.append(
            f"fastest micro batch: {fastest}, {rate_text(best.items_per_s or 0)} {unit}/s "
            f"({validity.verdict_text(best)}); within 5% of it: {', '.join(map(str, near))}"
        )
    for n, r in sorted(found.scaling.items()):
        if r.metrics and r.items_per_s and fastest is not None:
            curve = scaling.Pair(scaling.scale(r), scaling.scale(found.trials[fastest]))
            text = f"x{n} replicas at micro batch {fastest}: {rate_text(r.items_per_s)} {r.metrics.item_unit}/s"
            if curve.speedup is None or curve.efficiency is None:
                text += (
                    f", no scaling efficiency: {curve.row.threads} torch thread(s) per "
                    f"replica against {curve.base.threads} in the one-replica run"
                )
            else:
                text += (
                    f", {curve.speedup:.2f}x one replica ({100 * curve.efficiency:.0f}% scaling "
                    "efficiency)"
                )
            lines.append(text)
        else:
            lines.append(f"x{n} replicas at micro batch {fastest}: {r.status}: {r.reason}")
    if found.spent:
        lines.append(
            "the time budget ran out before the search was done: raise --budget-s to go on "
            "(trials measured so far are stored and reused)"
        )
    return lines


def fewest_lines(found: tuning.DeviceSearch, base: RunSpec, most: int) -> list[str]:
    """The fewest devices a sharded model trained on, with the trials that show it."""
    tried = ", ".join(f"{n}: {r.status}" for n, r in sorted(found.trials.items()))
    lines = [f"devices tried (x{base.tensor_parallel} tensor parallel each): {tried}"]
    fewest = found.fewest
    layout = configuration(base, batch=True, devices=False)
    if fewest is not None:
        best = found.trials[fewest]
        held = best.metrics.state_gib if best.metrics else None
        peak = best.metrics.peak_mem_reserved_gib if best.metrics else None
        lines.append(
            f"fewest devices: {fewest * base.tensor_parallel} ({layout})"
            + (f"; {held:.3g} GiB of weights and optimizer state per rank" if held else "")
            + (f", peak {peak:.3g} GiB reserved" if peak else "")
        )
    elif found.spent:
        lines.append("the time budget ran out before a count fitted: raise --budget-s")
    elif found.trials and all(r.status == "oom" for r in found.trials.values()):
        lines.append(f"out of memory on every count up to {most}: more devices, or --fsdp-offload")
    else:
        last = list(found.trials.values())[-1] if found.trials else None
        lines.append(f"stopped: {last.reason if last else 'nothing was tried'}")
    return lines


class Configuration(Frozen):
    """A configuration on a platform: the runs (repeats, seeds) it rests on and the objective's
    value with its interval."""

    cell: str
    batch_size: int
    global_batch: int
    num_devices: int
    precision: str
    framework: str
    value: float
    low: float | None
    high: float | None
    runs: list[str]
    """The stored results' keys."""


class PlatformAdvice(Frozen):
    platform: str
    best: Configuration | None
    """None: no configuration meets the objective and constraints."""
    confidence: str | None
    """high, few-runs, low, alone, no-interval or no-runner-up-interval (docs/advice.md)."""
    runner_up: Configuration | None
    batch_range: list[int]
    """The micro batches within 5% of the best's throughput (seed 003's effective range)."""
    trade_offs: list[Configuration]
    """Configurations none beats on throughput, devices, p99 latency and energy together."""
    frameworks: list[Configuration]
    """Each framework's best configuration, best first, where several frameworks ran on the
    platform (empty otherwise)."""
    left_out: dict[str, int]
    """Measured runs the constraints or their verdicts left out, by reason."""


class Published(Frozen):
    """A published figure, labelled as such: never part of the answer."""

    platform: str
    num_devices: int
    value: float
    unit: str
    source: str


class RecommendAnswer(Frozen):
    """`accelbench recommend --format json`: per platform, the best configuration first."""

    format: Literal["accelbench-recommend"] = "accelbench-recommend"
    version: Literal[2] = 2
    """2: each platform's `frameworks`."""
    workload: str
    objective: str
    unit: str
    """The objective's unit (items/s, s, J/item, $ per million items, ...)."""
    scenarios: list[str]
    constraints: dict[str, Any]
    """Those given, by name (global_batch, max_devices, memory_headroom_pct, ...)."""
    platforms: list[PlatformAdvice]
    published: list[Published] | None
    """With --reference: the best published figure on each other platform."""


class Trial(Frozen):
    """A trial of the search: its micro batch (or device count) and its stored result."""

    at: int
    result: Row


class BatchSearch(Frozen):
    replicas: int | None
    """With --fsdp, the replica count this search held (what fits depends on it); else None."""
    largest_fit: int | None
    first_oom: int | None
    fastest: int | None
    batch_range: list[int]
    """The micro batches within 5% of the fastest one's throughput."""
    trials: list[Trial]
    scaling: list[Trial]
    """The fastest micro batch at each replica count asked for (`at`: the count)."""
    budget_spent: bool


class TuneAnswer(Frozen):
    """`accelbench tune --format json`: the searches' findings and every trial."""

    format: Literal["accelbench-tune"] = "accelbench-tune"
    version: Literal[1] = 1
    workload: str
    searches: list[BatchSearch]
    """One a replica count held (--fsdp), else one."""
    fewest_devices: int | None
    """With --fewest-devices: the fewest devices it trained on (searches is then empty)."""
    device_trials: list[Trial]


def option(o: advice.Option) -> Configuration:
    from accelbench.report.cells import describe

    spec = o.result.spec
    return Configuration(
        cell=describe(spec),
        batch_size=spec.batch_size,
        global_batch=spec.global_batch,
        num_devices=o.result.num_devices,
        precision=spec.precision,
        framework=spec.framework,
        value=o.value,
        low=o.low,
        high=o.high,
        runs=[r.key for r in o.runs],
    )


def recommendation(
    workload: str,
    objective: str,
    unit: str,
    read: Sequence[str],
    constraints: objectives.Constraints,
    found: Sequence[advice.Advice],
    published: Sequence[Reference] | None,
) -> RecommendAnswer:
    given = {k: v for k, v in dataclasses.asdict(constraints).items() if v not in (None, {})}
    return RecommendAnswer(
        workload=workload,
        objective=objective,
        unit=unit,
        scenarios=list(read),
        constraints=given,
        platforms=[
            PlatformAdvice(
                platform=a.platform,
                best=option(a.options[0]) if a.options else None,
                confidence=str(a.confidence.level) if a.confidence else None,
                runner_up=(
                    option(a.confidence.runner_up)
                    if a.confidence and a.confidence.runner_up
                    else None
                ),
                batch_range=list(a.batch_range),
                trade_offs=[option(o) for o in a.pareto],
                frameworks=[option(o) for o in a.frameworks],
                left_out={str(why): n for why, n in a.excluded.items()},
            )
            for a in found
        ],
        published=None
        if published is None
        else [
            Published(
                platform=r.platform,
                num_devices=r.num_devices,
                value=r.value,
                unit=r.unit,
                source=r.source,
            )
            for r in published
        ],
    )


def batch_search(found: tuning.Search, replicas: int | None) -> BatchSearch:
    from accelbench.analysis import advice

    fastest = found.fastest
    near = (
        advice.batch_range(found.trials[fastest], list(found.trials.values()))
        if fastest is not None
        else []
    )
    return BatchSearch(
        replicas=replicas,
        largest_fit=found.largest_fit,
        first_oom=found.first_oom,
        fastest=fastest,
        batch_range=list(near),
        trials=[Trial(at=b, result=plain_row(r)) for b, r in sorted(found.trials.items())],
        scaling=[Trial(at=n, result=plain_row(r)) for n, r in sorted(found.scaling.items())],
        budget_spent=found.spent,
    )
