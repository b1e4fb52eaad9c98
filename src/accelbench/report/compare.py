"""Comparisons in words: ratios between matched cells, runs against published figures, and
published platforms against each other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from rich.table import Table

from accelbench import scenarios
from accelbench.analysis import comparison, references
from accelbench.analysis.references import Reference
from accelbench.records.frozen import Frozen
from accelbench.report import tables
from accelbench.report.cells import describe, label, rate_text
from accelbench.scenarios.base import ClientScenario


def ratio_grid(ratios: Sequence[comparison.Ratio], by: str) -> tables.Grid:
    """Each value's throughput against the baseline's in one matched cell, with the ratio's
    interval and whether the two can be ranked."""

    def band_text(b: comparison.Band) -> str:
        text = rate_text(b.median)
        if b.low is not None and b.high is not None:
            text += f" [{rate_text(b.low)}-{rate_text(b.high)}]"
        return text + (f" ({b.num_runs} runs)" if b.num_runs > 1 else "")

    rows = [
        (
            describe(r.cell.spec) + ("" if by == "platform" else f" on {r.cell.platform}"),
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
    return tables.Grid("", headers, rows, frozenset({0, 1, 2, 7}))


RANKING_TEXT = {
    comparison.Ranking.OVERLAP: "not ranked: intervals overlap",
    comparison.Ranking.NO_INTERVAL: "not ranked: no interval (too few steady steps; run more steps)",
    comparison.Ranking.CONTENDED: "not ranked: contended (other work shared the platform; run again)",
    comparison.Ranking.DRIFTING: "not ranked: drifting (the rate moved through the steady state)",
}


def ranking_text(r: comparison.Ratio) -> str:
    if r.ranking is comparison.Ranking.FASTER:
        return f"{r.value} faster"
    if r.ranking is comparison.Ranking.SLOWER:
        return f"{r.baseline} faster"
    return RANKING_TEXT[r.ranking]


def ratio_summary_lines(found: Sequence[comparison.Summary]) -> list[str]:
    """One line per value against its baseline; a ratio only from cells that were ranked, and
    how many were level (their intervals overlap)."""
    lines = []
    for s in found:
        matched = f"{s.num_matched} matched cell{'s' if s.num_matched > 1 else ''}"
        head = f"{s.value} against {s.baseline}"
        if s.geomean is not None:
            level = f", level in {s.num_level}" if s.num_level else ""
            lines.append(
                f"{head}: {s.geomean:.2f}x throughput (geometric mean of the {s.num_ranked} "
                f"ranked of {matched}): {s.value} faster in {s.num_faster}, {s.baseline} faster "
                f"in {s.num_slower}{level}"
            )
        elif s.num_level == s.num_matched:
            every = "the one matched cell" if s.num_matched == 1 else f"all {matched}"
            lines.append(f"{head}: level in {every} (their intervals overlap): no summary ratio")
        else:
            level = f"level in {s.num_level}, " if s.num_level else ""
            lines.append(
                f"{head}: ranked in none of {matched} ({level}see the verdicts): no summary ratio"
            )
    return lines


def unmatched_lines(found: Sequence[comparison.Unmatched], by: str) -> list[str]:
    """Why each configuration was compared with nothing."""
    lines = []
    for u in found:
        where = f"{describe(u.result.spec)} on {u.result.platform}: not compared: "
        if u.missing_baseline is not None:
            lines.append(where + f"not run at {by} {u.missing_baseline}")
        else:
            differs = ", ".join(
                f"{name} {mine} vs {theirs}" for name, mine, theirs in u.nearest[:3]
            )
            more = f" and {len(u.nearest) - 3} more" if len(u.nearest) > 3 else ""
            lines.append(where + f"the closest run at another {by} differs in {differs}{more}")
    return lines


def references_table(refs: Sequence[Reference]) -> Table:
    """Published figures with their conditions and source table."""
    headers = ("Source", "Model", "Platform", "Devices", "Micro batch", "Framework", "Metric")
    rows = [
        (
            f"{r.source}, {r.table}",
            r.model,
            r.platform,
            str(r.num_devices),
            "" if r.micro_batch is None else str(r.micro_batch),
            r.framework,
            r.metric,
            f"{r.value:,g} {r.unit}",
        )
        for r in refs
    ]
    words = frozenset({0, 1, 2, 5, 6})
    return tables.rich(tables.Grid("", (*headers, "Value"), rows, words))


def reference_table(matches: Sequence[references.Match], tolerance_pct: float) -> Table:
    """Each run against its closest published figure: measured / published, within the band
    or not."""
    headers = (
        "Workload",
        "Platform",
        "Devices",
        "Micro batch",
        "Precision",
        "Measured",
        "Published",
        "Ratio",
        f"Verdict (±{tolerance_pct:g}%)",
        "Reference",
    )
    rows = []
    for m in matches:
        r, ref = m.result, m.reference
        unit = " /device" if m.per_device else ""
        rows.append(
            (
                label(r.spec),
                r.platform,
                str(m.devices),
                str(r.spec.batch_size),
                "server's"
                if isinstance(scenarios.get(r.spec.scenario), ClientScenario)
                else r.spec.precision,
                rate_text(m.measured) + unit,
                rate_text(m.published) + unit,
                f"{m.ratio:.2f}",
                m.verdict(tolerance_pct)[0],
                f"{ref.platform}, {ref.num_devices} dev., {ref.framework}: {ref.source}, {ref.table}",
            )
        )
    return tables.rich(tables.Grid("", headers, rows, frozenset({0, 1, 4, 8, 9})))


def reference_notes(matches: Sequence[references.Match], tolerance_pct: float) -> list[str]:
    """Why each run outside the band may be there, and what differs from the published run."""
    lines = []
    for m in matches:
        verdict, causes = m.verdict(tolerance_pct)
        if causes or m.differences:
            because = "; ".join(dict.fromkeys([*causes, *m.differences]))
            lines.append(f"{describe(m.result.spec)}: {verdict}: {because}")
    if any(m.per_device for m in matches):
        lines.append("/device: throughput divided by the device count (derived).")
    return lines


def head_to_head(refs: Sequence[Reference]) -> list[str]:
    """Published platform families against each other (references.head_to_head), each ratio
    marked as derived."""
    lines = []
    for h in references.head_to_head(refs):
        fast, slow = h.fast, h.slow
        what = "each at its best" if h.micro_batch is None else f"micro batch {h.micro_batch}"
        p, q = references.family(fast.platform), references.family(slow.platform)
        lines.append(
            f"{h.table}, {h.workload}, {h.num_devices} device(s), {what}: {p} "
            f"{rate_text(fast.value)}{_batch(fast)} vs {q} {rate_text(slow.value)}{_batch(slow)} "
            f"{fast.unit}: {p} {h.ratio:.2f}x faster (derived)"
        )
    return lines


def _batch(ref: Reference) -> str:
    """A published figure's micro batch, where it gives one (a server's is its own)."""
    return "" if ref.micro_batch is None else f" (micro batch {ref.micro_batch})"


def ratios_json(
    by: str,
    baseline: str | None,
    ratios: Sequence[comparison.Ratio],
    summary: Sequence[comparison.Summary],
    alone: Sequence[comparison.Unmatched],
) -> CompareAnswer:
    """compare --by's answer as data: each ratio with its interval and ranking, the summary per
    value, and the configurations compared with nothing."""

    def band(b: comparison.Band) -> RepeatsBand:
        return RepeatsBand(median=b.median, low=b.low, high=b.high, runs=b.num_runs)

    def cell(named: comparison.Named) -> dict[str, Any]:
        spec = named.spec
        return {"cell": describe(spec), "workload": spec.workload, "platform": named.platform}

    return CompareAnswer(
        by=by,
        baseline=baseline,
        ratios=[
            RatioRow(
                **cell(r.cell),
                value=r.value,
                baseline=r.baseline,
                ratio=r.ratio,
                interval=None if r.interval is None else list(r.interval),
                ranking=str(r.ranking),
                measured=band(r.measured),
                reference=band(r.reference),
            )
            for r in ratios
        ],
        summary=[
            ValueSummary(
                value=s.value,
                baseline=s.baseline,
                geomean=s.geomean,
                matched=s.num_matched,
                faster=s.num_faster,
                slower=s.num_slower,
                level=s.num_level,
            )
            for s in summary
        ],
        unmatched=[
            UnmatchedCell(
                **cell(u.result),
                missing_baseline=u.missing_baseline,
                nearest=[list(n) for n in u.nearest],
            )
            for u in alone
        ],
    )


class ReferenceMatch(Frozen):
    key: str
    cell: str
    workload: str
    platform: str
    measured: float
    published: float
    unit: str
    per_device: bool
    """Both figures per device, as the device counts differ."""
    ratio: float
    agreement: str
    """agrees (within the tolerance), below-reference or above-reference."""
    causes: list[str]
    """What the record shows could explain a disagreement: its flags, the differences."""
    source: str
    table: str


class ReferenceAnswer(Frozen):
    """`accelbench compare --reference --format json`."""

    format: Literal["accelbench-compare-reference"] = "accelbench-compare-reference"
    version: Literal[1] = 1
    tolerance_pct: float
    matches: list[ReferenceMatch]
    unmatched: list[list[str]]
    """[workload, platform] of stored runs with no published figure of their device family."""


class RepeatsBand(Frozen):
    """A configuration's repeats: the median rate and the span of their 95% intervals."""

    median: float
    low: float | None
    high: float | None
    runs: int


class RatioRow(Frozen):
    cell: str
    workload: str
    platform: str
    value: str
    baseline: str
    ratio: float
    interval: list[float] | None
    ranking: str
    """faster, slower, overlap, no-interval, contended or drifting."""
    measured: RepeatsBand
    reference: RepeatsBand


class ValueSummary(Frozen):
    value: str
    baseline: str
    geomean: float | None
    matched: int
    faster: int
    slower: int
    level: int
    """Matched cells whose intervals overlap."""


class UnmatchedCell(Frozen):
    cell: str
    workload: str
    platform: str
    missing_baseline: str | None
    nearest: list[list[Any]]
    """[field, its value, the nearest other's] that kept it apart."""


class CompareAnswer(Frozen):
    """`accelbench compare --by FIELD --format json` (report.compare.ratios_json)."""

    format: Literal["accelbench-compare"] = "accelbench-compare"
    version: Literal[2] = 2
    """2: each summary's `level`."""
    by: str
    baseline: str | None
    ratios: list[RatioRow]
    summary: list[ValueSummary]
    unmatched: list[UnmatchedCell]


def reference_answer(
    matches: Sequence[references.Match], unmatched: Sequence[tuple[str, str]], tolerance_pct: float
) -> ReferenceAnswer:
    from accelbench.report.cells import describe

    found = []
    for m in matches:
        agreement, causes = m.verdict(tolerance_pct)
        found.append(
            ReferenceMatch(
                key=m.result.key,
                cell=describe(m.result.spec),
                workload=m.result.spec.workload,
                platform=m.result.platform,
                measured=m.measured,
                published=m.published,
                unit=m.reference.unit,
                per_device=m.per_device,
                ratio=m.ratio,
                agreement=str(agreement),
                causes=causes,
                source=m.reference.source,
                table=m.reference.table,
            )
        )
    return ReferenceAnswer(
        tolerance_pct=tolerance_pct, matches=found, unmatched=[list(u) for u in unmatched]
    )


class ReferencesAnswer(Frozen):
    """`accelbench references --format json`: the published results shipped, with sources."""

    format: Literal["accelbench-references"] = "accelbench-references"
    version: Literal[1] = 1
    references: list[Reference]
