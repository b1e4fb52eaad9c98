"""Results as tables for people (rich), and as CSV and JSON for other tools."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from accelbench import (
    advice,
    comparison,
    convergence,
    references,
    scaling,
    tables,
    tuning,
    validity,
)
from accelbench.advice import ANY_BATCH
from accelbench.references import Reference
from accelbench.result import MEASURED, Result, TimeToTrain, cell_key
from accelbench.tables import rate_text

INFERENCE = ("infer", "server")
NOT_VALID_NOTE = "(value): measured, but not a valid result; the status says why."


def table(results: Sequence[Result], title: str | None = None) -> Table:
    return tables.rich(results_grid(results, title or ""))


def results_grid(results: Sequence[Result], title: str = "") -> tables.Grid:
    """The paper's Table 4 layout: platform, replicas, micro batch, precision, time of the last
    epoch and throughput, with how precisely it is known, MFU, input wait and the verdict; and
    the scenario, which tells a training row from an inference or server row."""
    groups = validity.repeat_groups(results)
    speedups = _speedups(results)
    rows = []
    for r in results:
        m = r.metrics
        throughput = "" if r.items_per_s is None else rate_text(r.items_per_s)
        if _shown_invalid(r) and throughput:
            throughput = f"({throughput})"
        rows.append(
            (
                label(r),
                r.spec.scenario,
                r.env.platform,
                str(r.spec.replicas),
                str(r.spec.batch_size),
                r.spec.precision + (" +compile" if r.spec.compile else ""),
                "" if m is None else f"{m.epochs[-1].time_s:.2f}",
                throughput,
                ci_text(r),
                _speedup_text(speedups.get(id(r))),
                mfu_text(r),
                wait_text(r),
                _verdict_cell(r, validity.siblings(r, groups)),
            )
        )
    headers = (
        "Workload",
        "Scenario",
        "Platform",
        "Replicas",
        "Micro batch",
        "Precision",
        "Last epoch (s)",
        "Throughput (items/s)",
        "± CI (%)",
        "Speed-up (eff.)",
        "MFU (%)",
        "Input wait (%)",
        "Verdict",
    )
    return tables.Grid(title, headers, rows, frozenset({0, 1, 2, 5, 12}))


def notes(results: Sequence[Result], latency_bound_ms: float | None = None) -> list[str]:
    """Lines printed under the table: why each result is not ok or not valid, the spread of
    repeats, and how MFU's peaks were obtained. Results from several platforms get their lines
    platform by platform, each line led by the platform's name."""
    platforms = list(dict.fromkeys(r.env.platform for r in results))
    if len(platforms) > 1:
        lines = [
            f"{platform}: {line}"
            for platform in platforms
            for line in notes([r for r in results if r.env.platform == platform], latency_bound_ms)
            if line != NOT_VALID_NOTE
        ]
        return lines + ([NOT_VALID_NOTE] if any(_shown_invalid(r) for r in results) else [])
    groups = validity.repeat_groups(results)
    lines = []
    for r in results:
        if r.status not in MEASURED:
            lines.append(f"{_cell(r)}: {r.status}: {r.reason}")
            continue
        for flag, reason in validity.verdict(r):  # the repeats' spread is one line below
            lines.append(f"{_cell(r)}: {flag}: {reason}")
    for members in groups.values():
        spread = validity.repeat_spread(members)
        if spread is not None:
            rates = [
                rate_text(v) for v in sorted(m.items_per_s or 0 for m in members if m.items_per_s)
            ]
            target = members[0].spec.ci_pct or validity.NOISY_PCT
            lines.append(
                f"{_cell(members[0])}: {len(members)} repeats, {' '.join(rates)} items/s, "
                f"spread {spread:.1f}%"
                + (f": noisy, target {target:g}%" if spread > target else "")
            )
    lines += [compile_payoff(p) for p in scaling.compile_payoffs(results)]
    lines += [rank_line(r) for r in results if r.metrics and r.metrics.ranks]
    lines += [latency_line(r) for r in results if r.metrics and r.spec.scenario in INFERENCE]
    lines += [server_line(r) for r in results if r.metrics and r.metrics.server]
    lines += inference_headlines(results, latency_bound_ms)
    lines += [time_to_train_line(r) for r in results if r.metrics and r.metrics.time_to_train]
    lines += time_to_train_headlines(results)
    lines += scaling_notes(results)
    peaks = {r.metrics.flops.peak_source for r in results if r.metrics and r.metrics.flops}
    lines += [f"MFU peak: {source}" for source in sorted(peaks)]
    if any(_shown_invalid(r) for r in results):
        lines.append(NOT_VALID_NOTE)
    return lines


def scaling_notes(results: Sequence[Result]) -> list[str]:
    """Why an efficiency is not shown, and what an efficiency above 100% likely means."""
    lines = []
    for found in scaling.scaling(results):
        r, base = found.result, found.base
        if found.efficiency is None:
            lines.append(
                f"{_cell(r)}: no scaling efficiency: each replica ran {r.env.torch_num_threads} "
                f"torch thread(s), the one-replica run {base.env.torch_num_threads}; run both "
                f"with --threads {r.env.torch_num_threads} to compare like with like"
            )
        elif found.efficiency > 1:
            lines.append(
                f"{_cell(r)}: scaling efficiency {100 * found.efficiency:.0f}% is above 100%: "
                "likely the one-replica run was held back (its verdict, other load) or each "
                "replica's smaller share fits a cache better; it is not a property of the platform"
            )
    return lines


def _speedups(results: Sequence[Result]) -> dict[int, scaling.Scaling]:
    """The like-with-like scaling of each multi-replica result, by id()."""
    return {id(s.result): s for s in scaling.scaling(results) if s.speedup is not None}


def _speedup_text(found: scaling.Scaling | None) -> str:
    if found is None or found.speedup is None or found.efficiency is None:
        return ""
    return f"{found.speedup:.2f}x ({100 * found.efficiency:.0f}%)"


def rank_line(result: Result) -> str:
    """Each replica's own throughput and where it ran, for a data-parallel result."""
    assert result.metrics is not None
    ranks = result.metrics.ranks
    slowest = min(ranks, key=lambda k: k.items_per_s)
    places = ", ".join(
        f"{k.hostname}/NUMA {'several' if k.numa_node is None else k.numa_node}" for k in ranks
    )
    return (
        f"{_cell(result)}: per rank {' '.join(rate_text(k.items_per_s) for k in ranks)} "
        f"{result.metrics.item_unit}/s (slowest: rank {slowest.rank}); placed on {places}"
    )


def compile_payoff(payoff: scaling.CompilePayoff) -> str:
    """How many steps it takes torch.compile's first-step cost to pay for itself, in words."""
    saved = payoff.saved_ms
    text = (
        f"{_cell(payoff.compiled)}: torch.compile costs {payoff.cost_ms / 1e3:.1f} s more in the "
        f"first step and {'saves' if saved > 0 else 'adds'} {abs(saved):.2f} ms per step"
    )
    if payoff.break_even_steps is None:
        return text + ": it never pays off here"
    return text + f": it pays off after {payoff.break_even_steps:,.0f} steps"


def _cell(r: Result) -> str:
    """The cell in a few words: workload, micro batch, accumulation, replicas, precision."""
    spec = r.spec
    scenario = "" if spec.scenario == "train" else f" {spec.scenario}"
    text = f"{label(r)}{scenario} bs={spec.batch_size}"
    text += f" accum={spec.grad_accum}" if spec.grad_accum > 1 else ""
    text += f" x{spec.replicas} replicas" if spec.replicas > 1 else ""
    text += f" in {spec.pipeline_stages} stages" if spec.pipeline_stages > 1 else ""
    text += f" on {spec.nodes} nodes" if spec.nodes > 1 else ""
    return text + f" {spec.precision}" + (" +compile" if spec.compile else "")


def _verdict_cell(r: Result, repeats: Sequence[Result]) -> str:
    return validity.verdict_text(r, repeats) if r.status in MEASURED else r.status


def ci_text(result: Result) -> str:
    """Half-width of the headline's 95% interval, percent; blank where there is none."""
    ci = result.items_per_s_ci
    if ci is None or not result.items_per_s:
        return ""
    return f"{100 * (ci[1] - ci[0]) / 2 / result.items_per_s:.1f}"


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


def label(result: Result) -> str:
    """The workload with its model args, the data set's name if not synthetic, and the loader
    workers if any."""
    spec = result.spec
    args = ",".join(f"{k}={v}" for k, v in spec.model_args.items())
    text = spec.workload + (f"({args})" if args else "")
    text += f" on {Path(spec.data).name}" if spec.data else ""
    text += f", {spec.workers} workers" if spec.workers else ""
    text += f", seed {spec.seed}" if spec.seed else ""
    return text + (f", repeat {spec.repeat}" if spec.repeat else "")


def _shown_invalid(result: Result) -> bool:
    return result.metrics is not None and result.status != "ok"


def cell_line(result: Result, skipped: bool) -> str:
    """The line printed as a sweep cell finishes."""
    m = result.metrics
    cell = _cell(result)
    if skipped:
        return f"= {cell}: stored earlier, skipped (--force re-runs it)"
    if m is None:
        return f"✗ {cell}: {result.status}: {result.reason}"
    iqr = iqr_text(result)
    rate = m.delivered
    text = (
        (f"{rate_text(result.items_per_s)} {m.item_unit}/s" if result.items_per_s else "no rate")
        + (f" ±{ci_text(result)}%" if ci_text(result) else "")
        + (" sustained" if m.server else f" ({rate.num_items:,} items in {rate.time_s:.3g} s)")
        + (f", window IQR {iqr}%" if iqr else "")
        + (f", MFU {mfu_text(result)}%" if mfu_text(result) else "")
        + (f", input wait {wait_text(result)}%" if wait_text(result) else "")
        + f", last epoch {m.epochs[-1].time_s:.2f} s, first step {m.first_step_ms:.0f} ms"
        + (f", cell overhead {result.overhead_s:.1f} s" if result.overhead_s is not None else "")
    )
    if result.status != "ok":
        return f"✗ {cell}: ({text}): {result.status}: {result.reason}"
    flags = validity.verdict_text(result)
    return f"✓ {cell}: {text}" if flags == "valid" else f"! {cell}: {text}: {flags}"


def flat(result: Result) -> dict[str, object]:
    """One row of plain values: the spec, the platform and the headline metrics."""
    spec, m = result.spec, result.metrics
    row: dict[str, object] = {
        "key": result.key,
        "created_at": result.created_at.isoformat(),
        "workload": spec.workload,
        "model_args": json.dumps(spec.model_args) if spec.model_args else None,
        "data": spec.data,
        "scenario": spec.scenario,
        "platform": result.env.platform,
        "device_type": result.env.device_type,
        "hostname": result.env.hostname,
        "replicas": spec.replicas,
        "nodes": spec.nodes,
        "micro_batch": spec.batch_size,
        "grad_accum": spec.grad_accum,
        "global_batch": spec.global_batch,
        "precision": spec.precision,
        "compile": spec.compile,
        "channels_last": spec.channels_last,
        "workers": spec.workers,
        "repeat": spec.repeat,
        "status": result.status,
        "reason": result.reason,
        "wall_s": result.wall_s,
        "overhead_s": result.overhead_s,
    }
    if m is not None:
        w, s, ci = m.window_items_per_s, m.step_ms_steady, result.items_per_s_ci
        row |= {
            "item_unit": m.item_unit,
            "items_per_s": result.items_per_s,
            "items_per_s_ci_low": ci[0] if ci else None,
            "items_per_s_ci_high": ci[1] if ci else None,
            "steady_items": m.delivered.num_items,
            "steady_s": m.delivered.time_s,
            "window_items_per_s_median": w.median,
            "window_items_per_s_p25": w.p25,
            "window_items_per_s_p75": w.p75,
            "num_windows": w.n,
            "others_cpus": m.host.others_cpus if m.host else None,
            "load_avg_start": m.host.load_avg_start if m.host else None,
            "ci_met": m.ci_met,
            "verdict": validity.verdict_text(result),
            "flops_per_item": m.flops.per_item if m.flops else None,
            "mfu": m.mfu,
            "mfu_peak_source": m.flops.peak_source if m.flops else None,
            "energy_method": m.energy.method if m.energy else None,
            "joules_per_item": m.joules_per_item,
            "avg_power_w": m.energy.avg_power_w if m.energy else None,
            "compute_items_per_s": m.compute_items_per_s,
            "input_wait_frac": m.input_wait_frac,
            "step_ms_median": s.median,
            "step_ms_p90": s.p90,
            "step_ms_p99": s.p99,
            "num_steady_steps": s.n,
            "first_step_ms": m.first_step_ms,
            "first_epoch_s": m.epochs[0].time_s,
            "last_epoch_s": m.epochs[-1].time_s,
            "loss_last": m.epochs[-1].loss_last,
            "diverged_at_step": m.diverged_at_step,
            "peak_mem_allocated_gib": m.peak_mem_allocated_gib,
            "host_peak_rss_gib": m.host_peak_rss_gib,
            "timer": m.timer,
        }
    if m is not None and (t := m.time_to_train) is not None:
        row |= {
            "target": t.target,
            "outcome": t.outcome,
            "time_to_target_s": t.time_to_target_s,
            "steps_to_target": t.steps_to_target,
            "passes_to_target": t.passes_to_target,
            "train_s": t.train_s,
            "eval_s": t.eval_s,
            "lr": t.lr,
        }
    return row


def to_csv(results: Sequence[Result]) -> str:
    speedups = _speedups(results)
    rows = []
    for r in results:
        found = speedups.get(id(r))
        rows.append(
            flat(r)
            | {
                "speedup": found.speedup if found else None,
                "scaling_efficiency": found.efficiency if found else None,
            }
        )
    return rows_csv(rows)


def rows_csv(rows: Sequence[dict[str, object]]) -> str:
    """CSV of plain rows, with every column any row has."""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def references_table(refs: Sequence[Reference]) -> Table:
    """Published figures with their conditions and source table."""
    out = Table()
    for name in ("Source", "Model", "Platform", "Devices", "Micro batch", "Framework", "Metric"):
        out.add_column(name, justify="right" if name in ("Devices", "Micro batch") else "left")
    out.add_column("Value", justify="right")
    for r in refs:
        out.add_row(
            f"{r.source}, {r.table}",
            r.model,
            r.platform,
            str(r.num_devices),
            "" if r.micro_batch is None else str(r.micro_batch),
            r.framework,
            r.metric,
            f"{r.value:,g} {r.unit}",
        )
    return out


def to_json(results: Sequence[Result]) -> str:
    """The full stored records, as a JSON list (NaN and infinity written as strings)."""
    return "[\n" + ",\n".join(r.model_dump_json(indent=2) for r in results) + "\n]\n"


def reference_table(matches: Sequence[references.Match], tolerance_pct: float) -> Table:
    """Each run against its closest published figure: measured / published, within the band
    or not."""
    out = Table()
    for name in ("Workload", "Platform", "Replicas", "Micro batch", "Precision"):
        out.add_column(name, justify="right" if name in ("Replicas", "Micro batch") else "left")
    for name in ("Measured", "Published", "Ratio", f"Verdict (±{tolerance_pct:g}%)", "Reference"):
        out.add_column(
            name, justify="right" if name in ("Measured", "Published", "Ratio") else "left"
        )
    for m in matches:
        r, ref = m.result, m.reference
        unit = " /device" if m.per_device else ""
        out.add_row(
            label(r),
            r.env.platform,
            str(r.spec.replicas),
            str(r.spec.batch_size),
            r.spec.precision,
            rate_text(m.measured) + unit,
            rate_text(m.published) + unit,
            f"{m.ratio:.2f}",
            m.verdict(tolerance_pct)[0],
            f"{ref.platform}, {ref.num_devices} dev., {ref.framework}: {ref.source}, {ref.table}",
        )
    return out


def reference_notes(matches: Sequence[references.Match], tolerance_pct: float) -> list[str]:
    """Why each run outside the band may be there, and what differs from the published run."""
    lines = []
    for m in matches:
        verdict, causes = m.verdict(tolerance_pct)
        if causes or m.differences:
            because = "; ".join(dict.fromkeys([*causes, *m.differences]))
            lines.append(f"{_cell(m.result)}: {verdict}: {because}")
    if any(m.per_device for m in matches):
        lines.append("/device: throughput divided by the device count (derived).")
    return lines


def _at_batch(rows: Sequence[Reference], batch: int | None) -> Reference:
    return next(r for r in rows if r.micro_batch == batch)


def head_to_head(refs: Sequence[references.Reference]) -> list[str]:
    """Platform against platform from published throughputs alone, at the same device count:
    at the same micro batch, and each at its own best micro batch (the paper's Table 4 point:
    IPUs win at batch 10, GPUs at 512). Ratios are derived from the published values."""
    groups: dict[tuple[str, str, str | None, int], list[references.Reference]] = defaultdict(list)
    for r in refs:
        if r.metric in references.THROUGHPUT_METRICS and references.family(r.platform):
            groups[(r.source, r.table, r.workload, r.num_devices)].append(r)
    lines = []
    for (_, table, workload, devices), rows in groups.items():
        by_family: dict[str, list[references.Reference]] = defaultdict(list)
        for r in rows:
            by_family[references.family(r.platform) or ""].append(r)
        if len(by_family) < 2:
            continue
        where = f"{table}, {workload or rows[0].model}, {devices} device(s)"
        (a, a_rows), (b, b_rows) = sorted(by_family.items())[:2]
        batches = {r.micro_batch for r in a_rows} & {r.micro_batch for r in b_rows}
        pairs = [
            (f"micro batch {batch}", _at_batch(a_rows, batch), _at_batch(b_rows, batch))
            for batch in sorted(b for b in batches if b is not None)
        ]
        best = (max(a_rows, key=lambda r: r.value), max(b_rows, key=lambda r: r.value))
        if best not in [(x, y) for _, x, y in pairs]:
            pairs.append(("each at its best", *best))
        for what, x, y in pairs:
            (p, fast), (q, slow) = sorted(((a, x), (b, y)), key=lambda pair: -pair[1].value)
            lines.append(
                f"{where}, {what}: {p} {rate_text(fast.value)} (micro batch {fast.micro_batch}) vs "
                f"{q} {rate_text(slow.value)} (micro batch {slow.micro_batch}) {fast.unit}: "
                f"{p} {fast.value / slow.value:.2f}x faster (derived)"
            )
    return lines


def latency_line(result: Result) -> str:
    """An inference result's latency percentiles, each with the batches behind it."""
    assert result.metrics is not None
    s = result.metrics.step_ms_steady
    p99 = (
        f"p99 {s.p99:.2f} ms"
        if s.n >= validity.MIN_P99_SAMPLES
        else f"p99 not shown (needs {validity.MIN_P99_SAMPLES})"
    )
    return (
        f"{_cell(result)}: latency per batch p50 {s.median:.2f} ms, p90 {s.p90:.2f} ms, {p99}, "
        f"over {s.n} steady batches"
    )


def server_line(result: Result) -> str:
    """The server scenario's reported rate and its latencies, and how the rate was chosen."""
    assert result.metrics is not None and result.metrics.server is not None
    server = result.metrics.server
    if server.reported is None:
        return (
            f"{_cell(result)}: no rate kept p99 within {server.latency_bound_ms:g} ms "
            f"({server.search})"
        )
    t = server.trials[server.reported]
    what = (
        f"highest rate with p99 within {server.latency_bound_ms:g} ms"
        if result.spec.rate_per_s is None
        else "rate"
    )
    return (
        f"{_cell(result)}: server {what}: {t.target_per_s:.4g} queries/s sent, "
        f"{t.achieved_per_s:.4g} answered; latency p50 {t.latency.median:.2f} ms, p99 "
        f"{t.latency.p99:.2f} ms over {t.latency.n} queries, mean batch {t.mean_batch:.1f} "
        f"({server.search})"
    )


def inference_headlines(results: Sequence[Result], latency_bound_ms: float | None) -> list[str]:
    """From a batch-size sweep of inference runs: the throughput at the lowest latency, and the
    highest throughput whose p99 latency stays within the bound (only p99s with enough batches
    behind them count)."""
    groups: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        if r.spec.scenario == "infer" and r.status == "ok" and r.metrics:
            groups[cell_key(r, ignore=("batch_size",))].append(r)
    lines = []
    for members in groups.values():
        fastest = min(members, key=lambda r: r.metrics.step_ms_steady.median)  # type: ignore[union-attr]
        m = fastest.metrics
        assert m is not None
        lines.append(
            f"{_cell(fastest)}: lowest latency (p50 {m.step_ms_steady.median:.2f} ms) at batch "
            f"{fastest.spec.batch_size}, {rate_text(m.items_per_s)} {m.item_unit}/s"
        )
        if latency_bound_ms is None:
            continue
        within = [
            r
            for r in members
            if r.metrics
            and r.metrics.step_ms_steady.n >= validity.MIN_P99_SAMPLES
            and r.metrics.step_ms_steady.p99 <= latency_bound_ms
        ]
        if not within:
            lines.append(
                f"{label(fastest)}: no batch size has a p99 latency known to be within "
                f"{latency_bound_ms:g} ms"
            )
            continue
        best = max(within, key=lambda r: r.metrics.items_per_s)  # type: ignore[union-attr]
        assert best.metrics is not None
        lines.append(
            f"{_cell(best)}: highest throughput with p99 within {latency_bound_ms:g} ms: "
            f"{rate_text(best.metrics.items_per_s)} {best.metrics.item_unit}/s "
            f"(p99 {best.metrics.step_ms_steady.p99:.2f} ms)"
        )
    return lines


def time_to_train_table(results: Sequence[Result]) -> Table | None:
    grid = time_to_train_grid(results)
    return None if grid is None else tables.rich(grid)


def time_to_train_grid(results: Sequence[Result]) -> tables.Grid | None:
    """Throughput and time to target side by side, one row per cell over its seeds; None
    without time-to-train results."""
    summaries = convergence.by_seed(results)
    if not summaries:
        return None
    rows = []
    for s in summaries:
        first = s.runs[0]
        reached = [t for r in s.runs if (t := _ttt(r)).time_to_target_s is not None]
        rows.append(
            (
                label(first),
                first.env.platform,
                str(first.spec.global_batch),
                first.spec.precision,
                f"{first.spec.scaled_lr:.4g}",
                first.spec.target or "",
                "" if s.items_per_s is None else rate_text(s.items_per_s),
                "" if s.median_s is None else f"{s.median_s:.2f}",
                f"{s.time_to_target_s[0]:.2f}-{s.time_to_target_s[-1]:.2f}"
                if s.num_reached > 1
                else "",
                f"{s.num_reached}/{len(s.runs)}",
                _median_text([t.steps_to_target for t in reached], "{:.0f}"),
                _median_text([t.passes_to_target for t in reached], "{:.2f}"),
            )
        )
    headers = (
        "Workload",
        "Platform",
        "Global batch",
        "Precision",
        "LR",
        "Target",
        "Throughput (items/s)",
        "Time to target (s)",
        "Range (s)",
        "Reached",
        "Steps",
        "Passes",
    )
    return tables.Grid(
        "Time to train (training clock; evaluation left out)",
        headers,
        rows,
        frozenset({0, 1, 3, 4, 5}),
    )


def _ttt(result: Result) -> TimeToTrain:
    assert result.metrics is not None and result.metrics.time_to_train is not None
    return result.metrics.time_to_train


def _median_text(values: Sequence[float | None], form: str) -> str:
    known = [v for v in values if v is not None]
    return form.format(statistics.median(known)) if known else ""


def time_to_train_line(result: Result) -> str:
    """A time-to-train run: what ended it, at what cost, and any loss spike it recovered from."""
    t, m = _ttt(result), result.metrics
    assert m is not None
    if t.time_to_target_s is not None:
        text = (
            f"reached {t.target} in {t.time_to_target_s:.2f} s of training ({t.reason}): "
            f"{t.steps_to_target} steps, {t.items_to_target:,} {m.item_unit}, "
            f"{t.passes_to_target:.2f} passes over {t.num_train_items:,}"
        )
    else:
        text = f"{t.outcome}: {t.reason}"
    text += f"; +{t.eval_s:.2f} s evaluating {t.num_held_out_items:,} held out; lr {t.lr_rule}"
    first = m.loss[0]
    if math.isfinite(t.max_loss) and t.max_loss > result.spec.diverge_factor * first:
        text += (
            f"; loss peaked at {t.max_loss:.4g} at step {t.max_loss_step} "
            f"({t.max_loss / first:.3g}x the first step's)"
        )
    return f"{_cell(result)}: {text}"


def time_to_train_headlines(results: Sequence[Result]) -> list[str]:
    """Per workload and target: the seeds' spread of each cell, and whether the batch with the
    highest throughput is also the quickest to the target."""
    lines = []
    groups: dict[str, list[convergence.SeedSummary]] = defaultdict(list)
    for s in convergence.by_seed(results):
        if len(s.runs) > 1:
            spread = (
                f", median {s.median_s:.2f} s, range {s.time_to_target_s[0]:.2f}-"
                f"{s.time_to_target_s[-1]:.2f} s"
                if s.num_reached > 1
                else ""
            )
            lines.append(
                f"{_cell(s.runs[0])}: {len(s.runs)} seeds, {s.num_reached} reached "
                f"{s.runs[0].spec.target}{spread}"
            )
        # budgets and evaluation cadence aside, as they only end runs
        key = cell_key(
            s.runs[0], ignore=(*ANY_BATCH, "max_steps", "max_measure_s", "steps_per_epoch")
        )
        groups[key].append(s)
    for summaries in groups.values():
        pair = convergence.quickest_vs_fastest(summaries)
        if pair is None:
            continue
        fastest, quickest = pair
        f = fastest.runs[0]
        unit = f.metrics.item_unit if f.metrics else "items"
        head = (
            f"{label(f)} {f.spec.target}: the highest throughput, global batch "
            f"{f.spec.global_batch} ({rate_text(fastest.items_per_s or 0)} {unit}/s)"
        )
        if quickest is None:
            lines.append(f"{head}: no global batch reached the target in half its seeds or more")
        elif fastest is quickest:
            lines.append(f"{head}, is also the quickest to train ({quickest.median_s:.2f} s)")
        else:
            q = quickest.runs[0]
            lines.append(
                f"{head}, is not the quickest to train: global batch {q.spec.global_batch} reaches "
                f"it in {quickest.median_s:.2f} s at {rate_text(quickest.items_per_s or 0)} "
                f"{unit}/s"
                + (
                    f", against {fastest.median_s:.2f} s"
                    if fastest.median_s is not None
                    else f"; it reached the target in {fastest.num_reached} of "
                    f"{len(fastest.runs)} seeds"
                )
            )
    return lines


def projection_lines(results: Sequence[Result], epochs: float, epoch_items: int) -> list[str]:
    """Projected time to train `epochs` epochs of `epoch_items` items at each training result's
    steady throughput: projected, not measured."""
    lines = []
    for r in results:
        if r.spec.scenario != "train" or (p := convergence.project(r, epochs, epoch_items)) is None:
            continue
        interval = (
            f" (95% interval {p.low_hours:.3g}-{p.high_hours:.3g} h)"
            if p.low_hours and p.high_hours
            else " (no interval: too few windows)"
        )
        lines.append(
            f"{_cell(r)}: projected {epochs:g} epochs x {epoch_items:,} items = {p.hours:.3g} h"
            f"{interval} at {rate_text(r.items_per_s or 0)} items/s: projected from throughput, "
            "not measured; assumes this batch converges in that many epochs"
        )
    return lines


def ratio_table(ratios: Sequence[comparison.Ratio], by: str) -> Table:
    """Each value's throughput against the baseline's in one matched cell, with the ratio's
    interval and whether the two can be ranked."""

    def band_text(b: comparison.Band) -> str:
        text = rate_text(b.median)
        if b.low is not None and b.high is not None:
            text += f" [{rate_text(b.low)}-{rate_text(b.high)}]"
        return text + (f" ({b.num_runs} runs)" if b.num_runs > 1 else "")

    rows = [
        (
            _cell(r.cell) + ("" if by == "platform" else f" on {r.cell.env.platform}"),
            r.value,
            r.baseline,
            band_text(r.measured),
            band_text(r.reference),
            f"{r.ratio:.2f}x",
            "" if r.interval is None else f"{r.interval[0]:.2f}-{r.interval[1]:.2f}",
            ranking_text(r),
        )
        for r in ratios
    ]
    headers = (
        "Cell (as run at the baseline)",
        by,
        "against",
        "Items/s [95% interval]",
        "Baseline items/s",
        "Ratio",
        "Ratio interval",
        "Verdict",
    )
    return tables.rich(tables.Grid("", headers, rows, frozenset({0, 1, 2, 7})))


RANKING_TEXT = {
    comparison.Ranking.OVERLAP: "not ranked: intervals overlap",
    comparison.Ranking.NO_INTERVAL: "not ranked: no interval (too few steady steps; run more steps)",
    comparison.Ranking.CONTENDED: "not ranked: contended (other work shared the platform; run again)",
}


def ranking_text(r: comparison.Ratio) -> str:
    if r.ranking is comparison.Ranking.FASTER:
        return f"{r.value} faster"
    if r.ranking is comparison.Ranking.SLOWER:
        return f"{r.baseline} faster"
    return RANKING_TEXT[r.ranking]


def ratio_summary_lines(found: Sequence[comparison.Summary]) -> list[str]:
    """One line per value against its baseline."""
    return [
        f"{s.value} against {s.baseline}: {s.geomean:.2f}x throughput (geometric mean of "
        f"{s.num_matched} matched cell{'s' if s.num_matched > 1 else ''}); ranked in "
        f"{s.num_ranked}: {s.value} faster in {s.num_faster}, {s.baseline} faster in "
        f"{s.num_slower}"
        for s in found
    ]


def _objective_text(value: float, objective: str) -> str:
    if objective == "time-to-train":
        return f"{value:.2f} s to target"
    if objective == "energy":
        return f"{value:.3g} J per item"
    if objective == "cost":
        return f"${value:.3g} per million items"
    return f"{rate_text(value)} items/s"


def advice_lines(found: Sequence[advice.Advice], objective: str) -> list[str]:
    """Each platform's answer with its evidence, confidence and gaps; then the platforms set
    against each other where their intervals allow."""
    lines = []
    ranked = [a for a in found if a.options]
    for i, a in enumerate(found, 1):
        if not a.options:
            lines.append(f"{i}. {a.platform}: no configuration meets the objective and constraints")
            lines += [f"   {why}" for why in a.excluded]
            continue
        best = a.options[0]
        interval = ""
        if best.low is not None and best.high is not None:
            interval = f" [{_objective_text(best.low, objective)} to {_objective_text(best.high, objective)}]"
        keys = ", ".join(r.key[:8] for r in best.runs)
        lines.append(
            f"{i}. {a.platform}: {advice.describe(best.result)}: "
            f"{_objective_text(best.value, objective)}{interval}; from {len(best.runs)} run(s): {keys}"
        )
        if objective == "time-to-train":
            reached = sum(1 for r in best.runs if r.status == "ok")
            lines.append(f"   seeds that reached the target: {reached}/{len(best.runs)}")
        lines.append(f"   confidence: {a.confidence}")
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
                f"{advice.describe(o.result)} ({rate_text(o.result.items_per_s or 0)} items/s)"
                for o in a.pareto
            )
            lines.append(
                f"   trade-offs (throughput, devices, p99 latency, energy; none beats another on all): {front}"
            )
        lines += [f"   left out: {why}" for why in a.excluded]
        lines += [f"   not measured: {gap}" for gap in a.not_measured]
    if len(ranked) > 1:
        first, second = ranked[0].options[0], ranked[1].options[0]
        clear = advice.clears(first, second, advice.GOALS[objective].lower_is_better)
        if clear is None:
            verdict = "not ranked: an interval is missing"
        elif clear:
            verdict = f"{ranked[0].platform} is best; its interval clears {ranked[1].platform}'s"
        else:
            verdict = f"{ranked[0].platform} and {ranked[1].platform} overlap: not ranked"
        lines.append(f"across platforms: {verdict}")
    return lines


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
            curve = scaling.Scaling(r, found.trials[fastest])
            text = f"x{n} replicas at micro batch {fastest}: {rate_text(r.items_per_s)} {r.metrics.item_unit}/s"
            if curve.speedup is None or curve.efficiency is None:
                text += (
                    f", no scaling efficiency: {r.env.torch_num_threads} torch thread(s) per "
                    f"replica against {curve.base.env.torch_num_threads} in the one-replica run"
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
