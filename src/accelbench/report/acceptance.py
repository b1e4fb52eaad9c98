"""The acceptance table: each result against its baseline (analysis.acceptance)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from accelbench.analysis.acceptance import Judged, Rule
from accelbench.analysis.roofline import Roof
from accelbench.records.frozen import Frozen
from accelbench.report.cells import describer, rate_text
from accelbench.report.results import listed
from accelbench.report.tables import Grid

HEADERS = ("Cell", "Platform", "Host", "Headline", "Baseline", "Ratio", "Acceptance", "Verdict")


def grid(judged: Sequence[Judged], rule: Rule) -> Grid:
    """A row per result; the rule in the title."""
    listing = listed([j.result for j in judged])[0]
    name = describer(j.result.spec for j in judged)
    rows = []
    for j, row in zip(judged, listing.rows, strict=True):
        r, headline = j.result, j.result.headline
        rows.append(
            (
                name(r.spec),
                r.platform,
                r.env.hostname,
                f"{rate_text(headline.value)} {headline.unit}" if headline else r.status,
                ""
                if j.baseline is None
                else f"{rate_text(j.baseline)} ({j.source or 'no source'})",
                "" if j.ratio is None else f"{j.ratio:.3f}",
                j.outcome.value,
                listing.verdict_text(row),
            )
        )
    title = f"Acceptance: at least {rule.min_ratio:g} of the baseline ({rule.judge})"
    return Grid(title, HEADERS, rows, frozenset({0, 1, 2, 4, 6, 7}))


def summary(judged: Sequence[Judged]) -> str:
    counts = Counter(j.outcome.value for j in judged)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


ROOF_HEADERS = (
    "Cell",
    "Platform",
    "Host",
    "Rate",
    "Compute",
    "Memory (floor)",
    "Communication",
    "Input",
    "Binds",
)


def roofline_grid(roofs: Sequence[Roof]) -> Grid:
    """A row per model result: its rate, its reach of each ceiling measured beside it, and the
    ceiling that binds (analysis.roofline)."""
    name = describer(r.result.spec for r in roofs)
    rows = []
    for roof in roofs:
        r, headline = roof.result, roof.result.headline
        reach = {c.name: f"{100 * c.share:.0f}%" for c in roof.ceilings}
        binding, nearest = roof.binding, roof.nearest
        if binding is not None:
            binds = binding.name
        elif nearest is not None:
            binds = f"neither ({nearest.name} nearest, {100 * nearest.share:.0f}%)"
        else:
            binds = "no ceiling measured here"
        rows.append(
            (
                name(r.spec),
                r.platform,
                r.env.hostname,
                f"{rate_text(headline.value)} {headline.unit}" if headline else "",
                reach.get("compute", ""),
                reach.get("memory", ""),
                reach.get("communication", ""),
                reach.get("input", ""),
                binds,
            )
        )
    return Grid(
        "Ceilings (binds: reached 80% or more)", ROOF_HEADERS, rows, frozenset({0, 1, 2, 8})
    )


def roofline_lines(roofs: Sequence[Roof]) -> list[str]:
    """The numbers behind each reach."""
    name = describer(r.result.spec for r in roofs)
    return [
        f"{name(roof.result.spec)}: {c.name}: {c.evidence}" for roof in roofs for c in roof.ceilings
    ]


class JudgedResult(Frozen):
    key: str
    cell: str
    platform: str
    value: float | None
    baseline: float | None
    ratio: float | None
    outcome: str
    """pass, fail or no baseline."""
    source: str


class AcceptAnswer(Frozen):
    """`accelbench accept --format json`."""

    format: Literal["accelbench-accept"] = "accelbench-accept"
    version: Literal[1] = 1
    min_ratio: float
    judge: str
    """value or interval: what must reach min_ratio x the baseline."""
    results: list[JudgedResult]


class CeilingReach(Frozen):
    name: str
    """compute, memory, communication or input."""
    share: float
    """The model's reach: its rate over the ceiling."""
    evidence: str


class ResultRoof(Frozen):
    key: str
    cell: str
    platform: str
    ceilings: list[CeilingReach]
    binding: str | None
    """The ceiling that binds it, where it reaches one closely enough."""


class RooflineAnswer(Frozen):
    """`accelbench roofline --format json`."""

    format: Literal["accelbench-roofline"] = "accelbench-roofline"
    version: Literal[1] = 1
    results: list[ResultRoof]


def accept_answer(judged: Sequence[Judged], rule: Rule) -> AcceptAnswer:
    from accelbench.report.cells import describe

    return AcceptAnswer(
        min_ratio=rule.min_ratio,
        judge=rule.judge,
        results=[
            JudgedResult(
                key=j.result.key,
                cell=describe(j.result.spec),
                platform=j.result.platform,
                value=j.result.items_per_s,
                baseline=j.baseline,
                ratio=j.ratio,
                outcome=str(j.outcome),
                source=j.source,
            )
            for j in judged
        ],
    )


def roofline_answer(roofs: Sequence[Roof]) -> RooflineAnswer:
    from accelbench.report.cells import describe

    return RooflineAnswer(
        results=[
            ResultRoof(
                key=r.result.key,
                cell=describe(r.result.spec),
                platform=r.result.platform,
                ceilings=[
                    CeilingReach(name=c.name, share=c.share, evidence=c.evidence)
                    for c in r.ceilings
                ],
                binding=r.binding.name if r.binding else None,
            )
            for r in roofs
        ]
    )
