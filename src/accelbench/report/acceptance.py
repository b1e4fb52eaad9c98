"""The acceptance table: each result against its baseline (analysis.acceptance)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from accelbench.analysis.acceptance import Judged, Rule
from accelbench.analysis.findings import Findings
from accelbench.report.cells import describer, rate_text
from accelbench.report.tables import Grid

HEADERS = ("Cell", "Platform", "Host", "Headline", "Baseline", "Ratio", "Acceptance", "Verdict")


def grid(judged: Sequence[Judged], rule: Rule) -> Grid:
    """A row per result; the rule in the title."""
    found = Findings([j.result for j in judged])
    name = describer(j.result.spec for j in judged)
    rows = []
    for j in judged:
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
                found.verdict_text(r),
            )
        )
    title = f"Acceptance: at least {rule.min_ratio:g} of the baseline ({rule.judge})"
    return Grid(title, HEADERS, rows, frozenset({0, 1, 2, 4, 6, 7}))


def summary(judged: Sequence[Judged]) -> str:
    counts = Counter(j.outcome.value for j in judged)
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
