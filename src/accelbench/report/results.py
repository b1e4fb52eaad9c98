"""The results table and the lines under it: what each result is, how sure, and why not."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from accelbench import scenarios
from accelbench.analysis import convergence, scaling, validity
from accelbench.analysis.findings import Findings
from accelbench.records.result import MEASURED, Result
from accelbench.records.spec import RunSpec
from accelbench.report import inference, tables
from accelbench.report.cells import (
    LAST_EPOCH,
    ci_text,
    describe,
    describer,
    differing,
    iqr_text,
    label,
    last_epoch_text,
    mfu_text,
    rate_text,
    settings,
    shown_invalid,
    wait_text,
)
from accelbench.report.time_to_train import time_to_train_headlines

NOT_VALID_NOTE = "(value): measured, but not a valid result; the status says why."


def results_grid(
    results: Sequence[Result], title: str = "", findings: Findings | None = None
) -> tables.Grid:
    """The paper's Table 4 layout: platform, replicas, micro batch, precision, time of the last
    epoch and throughput, with how precisely it is known, MFU, input wait and the verdict; and
    the scenario, which tells a training row from an inference or server row."""
    found = findings or Findings(results)
    knobs = differing(r.spec for r in results)
    rows = []
    for r in results:
        throughput = "" if r.items_per_s is None else rate_text(r.items_per_s)
        if shown_invalid(r) and throughput:
            throughput = f"({throughput})"
        rows.append(
            (
                label(r.spec),
                r.spec.scenario,
                r.platform,
                str(r.spec.replicas),
                str(r.spec.batch_size),
                settings(r.spec, knobs, batch=False, replicas=False),
                last_epoch_text(r),
                throughput,
                ci_text(r),
                _speedup_text(found.speedup(r)),
                mfu_text(r),
                wait_text(r),
                found.verdict_text(r),
            )
        )
    headers = (
        "Workload",
        "Scenario",
        "Platform",
        "Replicas",
        "Micro batch",
        "Precision, settings",
        LAST_EPOCH,
        "Throughput (items/s)",
        "95% CI (%)",
        "Speed-up (eff.)",
        "MFU (%)",
        "Input wait (%)",
        "Verdict",
    )
    return tables.Grid(title, headers, rows, frozenset({0, 1, 2, 5, 12}))


def notes(
    results: Sequence[Result],
    latency_bound_ms: float | None = None,
    findings: Findings | None = None,
) -> list[str]:
    """Lines printed under the table: why each result is not ok or not valid, the spread of
    repeats, and how MFU's peaks were obtained. Results from several platforms get their lines
    platform by platform, each line led by the platform's name."""
    platforms = list(dict.fromkeys(r.platform for r in results))
    if len(platforms) > 1:
        lines = [
            f"{platform}: {line}"
            for platform in platforms
            for line in notes([r for r in results if r.platform == platform], latency_bound_ms)
            if line != NOT_VALID_NOTE
        ]
        return lines + ([NOT_VALID_NOTE] if any(shown_invalid(r) for r in results) else [])
    findings = findings or Findings(results)
    groups = findings.groups
    name = describer(r.spec for r in results)
    lines = []
    for r in results:
        if r.status not in MEASURED:
            lines.append(f"{name(r.spec)}: {r.status}: {r.reason}")
            continue
        for flag, reason in validity.verdict(r):  # the repeats' spread is one line below
            lines.append(f"{name(r.spec)}: {flag}: {reason}")
    for members in groups.values():
        spread = validity.repeat_spread(members)
        if spread is not None:
            rates = [
                rate_text(v) for v in sorted(m.items_per_s or 0 for m in members if m.items_per_s)
            ]
            target = members[0].spec.ci_pct or validity.NOISY_PCT
            lines.append(
                f"{name(members[0].spec)}: {len(members)} repeats, {' '.join(rates)} items/s, "
                f"spread {spread:.1f}%"
                + (f": noisy, target {target:g}%" if spread > target else "")
            )
    lines += [compile_payoff(p, name=name) for p in scaling.compile_payoffs(results)]
    lines += [
        tokens_line(r, name=name)
        for r in results
        if r.metrics and r.metrics.tokens_per_item and _tokens_per_item(r.spec)
    ]
    lines += [rank_line(r, name=name) for r in results if r.metrics and r.metrics.ranks]
    lines += [
        line for r in results if r.metrics for line in scenarios.get(r.spec.scenario).lines(r, name)
    ]
    lines += inference.headlines(results, latency_bound_ms, name=name)
    lines += time_to_train_headlines(results, name=name)
    lines += scaling_notes(results, name, findings)
    peaks = {r.metrics.flops.peak_source for r in results if r.metrics and r.metrics.flops}
    lines += [f"MFU peak: {source}" for source in sorted(peaks)]
    if any(shown_invalid(r) for r in results):
        lines.append(NOT_VALID_NOTE)
    return lines


def scaling_notes(
    results: Sequence[Result],
    name: Callable[[RunSpec], str] = describe,
    findings: Findings | None = None,
) -> list[str]:
    """Why an efficiency is not shown, and what an efficiency above 100% likely means."""
    lines = []
    for found in (findings or Findings(results)).scalings:
        r, base = found.result, found.base
        if found.efficiency is None:
            lines.append(
                f"{name(r.spec)}: no scaling efficiency: each replica ran {r.env.torch_num_threads} "
                f"torch thread(s), the one-replica run {base.env.torch_num_threads}; run both "
                f"with --threads {r.env.torch_num_threads} to compare like with like"
            )
        elif found.efficiency > 1:
            lines.append(
                f"{name(r.spec)}: scaling efficiency {100 * found.efficiency:.0f}% is above 100%: "
                "likely the one-replica run was held back (its verdict, other load) or each "
                "replica's smaller share fits a cache better; it is not a property of the platform"
            )
    return lines


def _speedup_text(found: scaling.Scaling | None) -> str:
    if found is None or found.speedup is None or found.efficiency is None:
        return ""
    return f"{found.speedup:.2f}x ({100 * found.efficiency:.0f}%)"


def _tokens_per_item(spec: RunSpec) -> bool:
    """Whether a result's tokens are its items' (not a generation's new tokens, which its own
    lines give, nor a server's)."""
    scenario = scenarios.get(spec.scenario)
    return not (scenario.generates or scenario.client)


def tokens_line(result: Result, name: Callable[[RunSpec], str] = describe) -> str:
    """A language model's throughput in tokens, both MFUs, what each device achieved, and the
    weights and optimizer state per rank under its layout."""
    m = result.metrics
    assert m is not None and m.tokens_per_s is not None
    devices = result.num_devices
    parts = [
        f"{rate_text(m.tokens_per_s)} tokens/s ({rate_text(m.tokens_per_s / devices)} per device)"
    ]
    if m.mfu is not None or m.mfu_analytic is not None:
        counted = "-" if m.mfu is None else f"{100 * m.mfu:.1f}%"
        analytic = "-" if m.mfu_analytic is None else f"{100 * m.mfu_analytic:.1f}%"
        parts.append(f"MFU {counted} counted, {analytic} by 6N + attention")
    if m.tflops_per_device is not None:
        parts.append(f"{m.tflops_per_device:.3g} TFLOP/s per device")
    if m.state_gib is not None:
        where = "" if m.layout == "none" else f" per rank ({m.layout})"
        parts.append(f"weights and optimizer state {m.state_gib:.3g} GiB{where}")
    return f"{name(result.spec)}: " + "; ".join(parts)


def rank_line(result: Result, name: Callable[[RunSpec], str] = describe) -> str:
    """Each replica's own throughput and where it ran, for a data-parallel result."""
    assert result.metrics is not None
    ranks = result.metrics.ranks
    slowest = min(ranks, key=lambda k: k.items_per_s)
    places = ", ".join(
        f"{k.hostname}/NUMA {'several' if k.numa_node is None else k.numa_node}" for k in ranks
    )
    return (
        f"{name(result.spec)}: per rank {' '.join(rate_text(k.items_per_s) for k in ranks)} "
        f"{result.metrics.item_unit}/s (slowest: rank {slowest.rank}); placed on {places}"
    )


def compile_payoff(payoff: scaling.CompilePayoff, name: Callable[[RunSpec], str] = describe) -> str:
    """How many steps it takes torch.compile's first-step cost to pay for itself, in words."""
    saved = payoff.saved_ms
    text = (
        f"{name(payoff.compiled.spec)}: torch.compile costs {payoff.cost_ms / 1e3:.1f} s more in the "
        f"first step and {'saves' if saved > 0 else 'adds'} {abs(saved):.2f} ms per step"
    )
    if payoff.break_even_steps is None:
        return text + ": it never pays off here"
    return text + f": it pays off after {payoff.break_even_steps:,.0f} steps"


def token_projection_lines(results: Sequence[Result], tokens: float) -> list[str]:
    """Projected days and device-hours to train `tokens` tokens at each language model's steady
    training throughput: projected, not measured."""
    lines = []
    for r in results:
        m = r.metrics
        if r.spec.scenario not in scenarios.in_view("projection") or not (m and m.tokens_per_item):
            continue
        p = convergence.project(r, 1, math.ceil(tokens / m.tokens_per_item))
        if p is None:
            continue
        interval = (
            f" (95% interval {p.low_hours / 24:.3g}-{p.high_hours / 24:.3g} days)"
            if p.low_hours and p.high_hours
            else " (no interval: too few windows)"
        )
        lines.append(
            f"{describe(r.spec)}: projected {tokens:.3g} tokens = {p.hours / 24:.3g} days"
            f"{interval}, {p.hours * r.num_devices:,.0f} device-hours on {r.num_devices} "
            f"device(s), at {rate_text(m.tokens_per_s or 0)} tokens/s: projected from throughput, "
            "not measured"
        )
    return lines


def projection_lines(results: Sequence[Result], epochs: float, epoch_items: int) -> list[str]:
    """Projected time to train `epochs` epochs of `epoch_items` items at each training result's
    steady throughput: projected, not measured."""
    lines = []
    for r in results:
        if r.spec.scenario not in scenarios.in_view("projection"):
            continue
        if (p := convergence.project(r, epochs, epoch_items)) is None:
            continue
        interval = (
            f" (95% interval {p.low_hours:.3g}-{p.high_hours:.3g} h)"
            if p.low_hours and p.high_hours
            else " (no interval: too few windows)"
        )
        lines.append(
            f"{describe(r.spec)}: projected {epochs:g} epochs x {epoch_items:,} items = {p.hours:.3g} h"
            f"{interval} at {rate_text(r.items_per_s or 0)} items/s: projected from throughput, "
            "not measured; assumes this batch converges in that many epochs"
        )
    return lines


def cell_line(result: Result, skipped: bool) -> str:
    """The line printed as a sweep cell finishes."""
    m = result.metrics
    cell = describe(result.spec)
    if skipped:
        return f"= {cell}: stored earlier, skipped (--force re-runs it)"
    if m is None:
        return f"✗ {cell}: {result.status}: {result.reason}"
    text = scenarios.get(result.spec.scenario).cell_words(result) or _rate_words(result)
    text += f", cell overhead {result.overhead_s:.1f} s" if result.overhead_s is not None else ""
    if result.status != "ok":
        return f"✗ {cell}: ({text}): {result.status}: {result.reason}"
    flags = validity.verdict_text(result)
    return f"✓ {cell}: {text}" if flags == "valid" else f"! {cell}: {text}: {flags}"


def _rate_words(result: Result) -> str:
    """A measured result's headline, how sure it is and what shaped it, in words."""
    m = result.metrics
    assert m is not None
    iqr, rate, headline = iqr_text(result), m.delivered, result.headline
    steps = scenarios.get(result.spec.scenario).rated_by_steps
    return (
        (f"{rate_text(headline.value)} {headline.unit}" if headline else "no rate")
        + (f" = {rate_text(m.tokens_per_s)} tokens/s" if m.tokens_per_s and steps else "")
        + (f" {ci_text(result)}%" if ci_text(result) else "")
        + (f" ({rate.num_items:,} items in {rate.time_s:.3g} s)" if steps else "")
        + (f", window IQR {iqr}%" if iqr else "")
        + (f", MFU {mfu_text(result)}%" if mfu_text(result) else "")
        + (f", input wait {wait_text(result)}%" if wait_text(result) else "")
        + f", last epoch {m.epochs[-1].time_s:.2f} s, first step {m.first_step_ms:.0f} ms"
    )
