"""The results table and the lines under it: what each result is, how sure, and why not.

Both are computed from listings (report.listing), so that a site database's listing reads no
record: what depends on several rows (the knobs that differ, the repeats' spread, speed-ups and
compile's pay-off) is computed here once per listing, from one index per grouping."""

from __future__ import annotations

import math
from collections import ChainMap, Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property

from accelbench import scenarios
from accelbench.analysis import projection, scaling, validity
from accelbench.analysis.scaling import Pair, pair_up
from accelbench.records.result import MEASURED, Result
from accelbench.records.spec import RunSpec
from accelbench.report import inference, listing, tables
from accelbench.report.cells import (
    LAST_EPOCH,
    ci_text,
    describe,
    differing_values,
    iqr_text,
    knobs_text,
    mfu_text,
    rate_text,
    wait_text,
)
from accelbench.report.drawing import median_pick
from accelbench.report.listing import NAME, Listing

NOT_VALID_NOTE = "(value): measured, but not a valid result; the status says why."

LISTED_RATES = 8
"""A cell's repeats' rates are listed in its spread's line up to this many; past it, the range."""

Records = Callable[[Sequence[str]], Sequence[Result]]
"""The whole records of the keys given: what the few lines about several results read."""


@dataclass
class Rows:
    """A listing's rows with what they say together, each grouping indexed once."""

    rows: Sequence[Listing]
    runs: Mapping[str, Sequence[Listing]] | None = None
    """Where `rows` shows one row per cell and platform (folded()): the runs each stands for
    (its repeats on each of the platform's hosts), by the shown row's key."""

    def folded(self) -> Rows:
        """One row per cell and platform: its median run among the valid ones
        (drawing.median_pick, the one a figure draws), the others counted in its Runs column and
        folded into its notes. A site's report then shows its thousand cells, not its hundred
        thousand runs of them on its hosts."""
        cells: dict[tuple[str, str], list[Listing]] = defaultdict(list)
        for r in self.rows:
            cells[r.platform, r.fleet_cell].append(r)
        picks = [median_pick(runs, self.verdict_text, _rate)[0] for runs in cells.values()]
        return Rows(picks, dict(zip([p.key for p in picks], cells.values(), strict=True)))

    @cached_property
    def every(self) -> list[Listing]:
        """Every run the rows stand for."""
        return (
            list(self.rows)
            if self.runs is None
            else [m for r in self.rows for m in self.runs[r.key]]
        )

    def runs_of(self, row: Listing) -> Sequence[Listing]:
        return [row] if self.runs is None else self.runs[row.key]

    def runs_text(self, row: Listing) -> str:
        """How many runs a folded row stands for, and how many of them are not valid."""
        runs = self.runs_of(row)
        invalid = sum(self.verdict_text(m) != "valid" for m in runs)
        return f"{len(runs)}" + (f" ({invalid} not valid)" if invalid else "")

    def reasons(self, row: Listing) -> list[str]:
        """Why the row is not valid; for a folded row each reason among its runs once (the
        first run's words), with how many runs it holds for."""
        runs = self.runs_of(row)
        if len(runs) == 1:
            return self.lines(row, row.reasons)
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for run in runs:
            for reason in run.reasons:  # NAME: flag or status: why
                what = reason.split(": ", 2)[1]
                counts[what] += 1
                first.setdefault(what, reason)
        n = len(runs)
        return self.lines(row, [f"{first[w]} ({k} of {n} runs)" for w, k in counts.items()])

    @cached_property
    def knobs(self) -> list[str]:
        """The knobs whose values differ among the rows (cells.differing)."""
        defaults = listing.defaults()
        return differing_values(defaults, (r.knobs for r in self.rows), defaults)

    def name(self, row: Listing) -> str:
        """describe() of the row's spec with the listing's knobs (a folded row's without its
        repeat: it stands for the cell)."""
        label = self.label(row)
        return " ".join(filter(None, [label + row.words[len(row.label) :], self.knobs_text(row)]))

    def label(self, row: Listing) -> str:
        """cells.label() of the row's spec; a folded row's of several runs without its repeat."""
        if len(self.runs_of(row)) == 1:
            return row.label
        return row.label.removesuffix(f", repeat {row.repeat}")

    def knobs_text(self, row: Listing) -> str:
        if not self.knobs:  # most listings: no knob differs
            return ""
        return knobs_text(ChainMap(row.knobs, listing.defaults()), self.knobs)

    def lines(self, row: Listing, lines: Sequence[str]) -> list[str]:
        """`lines` with the row's name where they name it."""
        if not lines:  # most rows' tokens, ranks and scenario lines (100k rows: 250k names fewer)
            return []
        name = self.name(row)
        return [line.replace(NAME, name) for line in lines]

    @cached_property
    def groups(self) -> dict[str, list[Listing]]:
        """The repeats of each cell on each host, among every run."""
        groups: dict[str, list[Listing]] = defaultdict(list)
        for r in self.every:
            groups[r.cell].append(r)
        return groups

    @cached_property
    def spreads(self) -> dict[str, float]:
        """Each cell's repeats' spread (validity.spread_pct of spread_over()), where it has one."""
        found = {}
        for cell, members in self.groups.items():
            rates = [m.items_per_s or 0.0 for m in spread_over(members)]
            if (spread := validity.spread_pct(rates)) is not None:
                found[cell] = spread
        return found

    @cached_property
    def verdicts(self) -> dict[str, str]:
        """verdict_text() of every run, by key: what the figures mark each point with."""
        return {r.key: self.verdict_text(r) for r in self.every}

    def verdict_text(self, row: Listing) -> str:
        """validity.verdict_text with the row's repeats: "valid", its flags, or its status."""
        if row.status not in MEASURED:
            return row.status
        noisy = row.metrics and self.spreads.get(row.cell, 0.0) > row.target_pct
        return _verdict(tuple(row.flags), bool(noisy))

    @cached_property
    def pairs(self) -> list[Pair[Listing]]:
        return pair_up(self.rows)

    @cached_property
    def _speedups(self) -> dict[int, Pair[Listing]]:
        return {id(p.row): p for p in self.pairs if p.speedup is not None}

    def speedup(self, row: Listing) -> Pair[Listing] | None:
        """The like-with-like speed-up of a multi-replica row over its one-replica base."""
        return self._speedups.get(id(row))

    def speedup_text(self, row: Listing) -> str:
        found = self.speedup(row)
        if found is None or found.speedup is None or found.efficiency is None:
            return ""
        return f"{found.speedup:.2f}x ({100 * found.efficiency:.0f}%)"

    def payoffs(self) -> list[tuple[Listing, scaling.CompilePayoff]]:
        """torch.compile against eager mode in the same cell on the same platform."""
        eager = {r.cell: r for r in self.rows if not r.compiled and r.metrics}
        found = []
        for r in self.rows:
            base = eager.get(r.eager)
            if r.compiled and r.metrics and base is not None:
                assert r.first_step_ms is not None and base.first_step_ms is not None
                assert r.steady_ms is not None and base.steady_ms is not None
                payoff = scaling.CompilePayoff(
                    cost_ms=r.first_step_ms - base.first_step_ms,
                    saved_ms=base.steady_ms - r.steady_ms,
                )
                found.append((r, payoff))
        return found


def listed(results: Sequence[Result]) -> tuple[Rows, Records]:
    """Results held in memory as a listing's rows, and their records by key."""
    by_key = {r.key: r for r in results}
    return Rows([listing.of(r) for r in results]), lambda keys: [by_key[k] for k in keys]


def results_grid(results: Sequence[Result], title: str = "") -> tables.Grid:
    """grid() of the results."""
    return grid(listed(results)[0], title)


def grid(rows: Rows, title: str = "") -> tables.Grid:
    """The paper's Table 4 layout: platform, replicas, micro batch, precision, time of the last
    epoch and throughput, with how precisely it is known, MFU, input wait and the verdict; and
    the scenario, which tells a training row from an inference or server row."""
    out = []
    folded = rows.runs is not None
    for r in rows.rows:
        last_epoch, throughput, ci, mfu, wait = r.cells
        out.append(
            (
                rows.label(r),
                r.scenario,
                r.platform,
                str(r.replicas),
                str(r.batch_size),
                " ".join(filter(None, [r.config, rows.knobs_text(r)])),
                last_epoch,
                throughput,
                ci,
                rows.speedup_text(r),
                mfu,
                wait,
                rows.verdict_text(r),
                *([rows.runs_text(r)] if folded else []),
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
        "Throughput",
        "95% CI (%)",
        "Speed-up (eff.)",
        "MFU (%)",
        "Input wait (%)",
        "Verdict",
        *(["Runs (median shown)"] if folded else []),
    )
    return tables.Grid(title, headers, out, frozenset({0, 1, 2, 5, 12}))


def notes(results: Sequence[Result], latency_bound_ms: float | None = None) -> list[str]:
    """row_notes() of the results."""
    return row_notes(*listed(results), latency_bound_ms)


def row_notes(rows: Rows, records: Records, latency_bound_ms: float | None = None) -> list[str]:
    """Lines printed under the table: why each result is not ok or not valid, the spread of
    repeats, and how MFU's peaks were obtained. Results from several platforms get their lines
    platform by platform, each line led by the platform's name."""
    platforms = list(dict.fromkeys(r.platform for r in rows.rows))
    if len(platforms) > 1:
        lines = [
            f"{platform}: {line}"
            for platform in platforms
            for line in row_notes(
                Rows([r for r in rows.rows if r.platform == platform], rows.runs),
                records,
                latency_bound_ms,
            )
            if line != NOT_VALID_NOTE
        ]
        return lines + ([NOT_VALID_NOTE] if _any_invalid(rows.rows) else [])
    lines = [line for r in rows.rows for line in rows.reasons(r)]
    lines += spread_lines(rows)
    lines += [compile_payoff(p, rows.name(r)) for r, p in rows.payoffs()]
    for kind in range(3):  # tokens, then ranks, then the scenarios' own
        lines += [line for r in rows.rows for line in rows.lines(r, r.lines[kind])]
    lines += inference.headlines(rows.rows, latency_bound_ms, name=rows.name)
    whole = records([r.key for r in rows.rows if r.whole])
    knobs = rows.knobs

    def name(spec: RunSpec) -> str:
        return describe(spec, knobs)

    lines += scenarios.findings(whole, name)
    lines += scaling_lines(rows)
    peaks = {r.peak_source for r in rows.rows if r.peak_source}
    lines += [f"MFU peak: {source}" for source in sorted(peaks)]
    if _any_invalid(rows.rows):
        lines.append(NOT_VALID_NOTE)
    return lines


def spread_lines(rows: Rows) -> list[str]:
    """Each cell's repeats: how many, their rates and spread, and whether that is noisy (a
    folded row's: its runs, on each of its hosts)."""
    lines = []
    for row in rows.rows:
        if rows.runs is not None:
            runs = rows.runs[row.key]
        elif row is not (runs := rows.groups[row.cell])[0]:
            continue  # each cell's line once, at its first repeat
        spreads = {r.cell: rows.spreads[r.cell] for r in runs if r.cell in rows.spreads}
        if spreads:
            lines.append(f"{rows.name(row)}: {_spread_text(runs, spreads, row.target_pct)}")
    return lines


def _spread_text(runs: Sequence[Listing], spreads: Mapping[str, float], target: float) -> str:
    """The runs' rates (listed, or their range past LISTED_RATES) and the spread of each
    host's repeats (`spreads`, by cell) against the noisy `target`."""
    counted = spread_over(runs)
    rates = sorted(m.items_per_s or 0.0 for m in counted)
    left = sum(bool(m.items_per_s) and m.status == "ok" for m in runs) - len(counted)
    shown = (
        " ".join(map(rate_text, rates))
        if len(rates) <= LISTED_RATES
        else f"median {rate_text(rates[(len(rates) - 1) // 2])}, "
        f"{rate_text(rates[0])} to {rate_text(rates[-1])}"
    )
    noisy = sum(s > target for s in spreads.values())
    if len({r.cell for r in runs}) == 1:
        (spread,) = spreads.values()
        text = f"{len(runs)} repeats, {shown} items/s{_left(left)}, spread {spread:.1f}%"
        return text + (f": noisy, target {target:g}%" if noisy else "")
    hosts = len({r.hostname for r in runs})
    return (
        f"{len(runs)} runs on {hosts} hosts, {shown} items/s{_left(left)}; one host's repeats "
        f"spread {max(spreads.values()):.1f}% at most"
        + (f": noisy on {noisy} of {len(spreads)}, target {target:g}%" if noisy else "")
    )


def spread_over(runs: Sequence[Listing]) -> list[Listing]:
    """The runs a cell's repeats' spread is taken over: those valid on their own where any is
    (a flagged run never makes a valid one noisy, as drawing.median_pick never lets it hide
    one), else every run measured ok."""
    ok = [m for m in runs if m.items_per_s and m.status == "ok"]
    return [m for m in ok if not m.flags] or ok


@cache
def _verdict(flags: tuple[str, ...], noisy: bool) -> str:
    """A verdict's text from its own flags, made once for each of the few a site's runs have
    (a report judges each run two or three times: 300k verdicts at 100k runs)."""
    found = dict.fromkeys([*flags, *([validity.Flag.NOISY] if noisy else [])])
    return ", ".join(found) if found else "valid"


def _left(count: int) -> str:
    return f" ({count} flagged left out)" if count else ""


def _rate(row: Listing) -> float | None:
    return row.items_per_s


def _any_invalid(rows: Sequence[Listing]) -> bool:
    return any(r.metrics and r.status != "ok" for r in rows)


def scaling_notes(results: Sequence[Result]) -> list[str]:
    """scaling_lines() of the results."""
    return scaling_lines(Rows([listing.of(r) for r in results]))


def scaling_lines(rows: Rows) -> list[str]:
    """Why an efficiency is not shown, and what an efficiency above 100% likely means."""
    lines = []
    for pair in rows.pairs:
        r, base = pair.row, pair.base
        if pair.efficiency is None:
            lines.append(
                f"{rows.name(r)}: no scaling efficiency: each replica ran {r.threads} "
                f"torch thread(s), the one-replica run {base.threads}; run both "
                f"with --threads {r.threads} to compare like with like"
            )
        elif pair.efficiency > 1:
            lines.append(
                f"{rows.name(r)}: scaling efficiency {100 * pair.efficiency:.0f}% is above 100%: "
                "likely the one-replica run was held back (its verdict, other load) or each "
                "replica's smaller share fits a cache better; it is not a property of the platform"
            )
    return lines


def compile_payoff(payoff: scaling.CompilePayoff, name: str) -> str:
    """How many steps it takes torch.compile's first-step cost to pay for itself, in words."""
    saved = payoff.saved_ms
    text = (
        f"{name}: torch.compile costs {payoff.cost_ms / 1e3:.1f} s more in the "
        f"first step and {'saves' if saved > 0 else 'adds'} {abs(saved):.2f} ms per step"
    )
    if payoff.break_even_steps is None:
        return text + ": it never pays off here"
    return text + f": it pays off after {payoff.break_even_steps:,.0f} steps"


def token_projection_lines(results: Iterable[Result], tokens: float) -> list[str]:
    """Projected days and device-hours to train `tokens` tokens at each language model's steady
    training throughput: projected, not measured."""
    lines = []
    for r in results:
        m = r.metrics
        if r.spec.scenario not in scenarios.in_view("projection") or not (m and m.tokens_per_item):
            continue
        p = projection.project(r, 1, math.ceil(tokens / m.tokens_per_item))
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
        if (p := projection.project(r, epochs, epoch_items)) is None:
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
