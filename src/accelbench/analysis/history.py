"""A cell's headline over time, the change points in it, and the software that moved there.

A series is one cell on one host, its runs in time order. Change points are found on the
logarithm of the unflagged runs' rates (a change is a ratio) by ruptures' PELT with a penalty of
PENALTY x sigma^2 x ln(n), sigma estimated robustly from successive differences, so a step is
found wherever it is and noise alone rarely splits; each candidate is then kept only if Welch's
t-test between the runs on either side (up to the neighbouring change points) gives p < ALPHA,
as Apache Otava judges its E-Divisive candidates by a significance test. A change's size and
95% interval are the ratio of the two sides' geometric means. It is attributed to what the
environment says changed between consecutive runs within two runs of it (where a step of a few
sigma is placed): software versions,
the driver, CUDA, cuDNN, the OS (its kernel), Python, the threads, numeric environment variables.
Flagged runs (contended, noisy, throttled, ...) are shown but never used to find a change.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

PENALTY = 4.0
"""PELT's penalty per change point in units of sigma^2 ln(n): BIC's 2, doubled, which kept 200
flat points of 3% noise free of any change in every seed tried (tests/analysis)."""
ALPHA = 0.001
"""The p-value below which a candidate change is kept (Welch's t-test on either side)."""
MIN_SIDE = 4
"""The fewest unflagged runs on each side of a change: fewer cannot give it an interval."""


@dataclass(frozen=True, slots=True)
class Point:
    at: datetime
    key: str
    """The run's stored result (`accelbench export` or the JSON answer names it)."""
    value: float
    """The headline rate (higher is better)."""
    flagged: bool
    software: Mapping[str, str] = field(default_factory=dict)
    """What the environment captured that can change between runs, flat: field -> value."""
    interval: tuple[float, float] | None = None
    """The rate's 95% interval within its run, where it has one."""
    flags: Sequence[str] = ()
    """What its verdict flagged (flagged: any), in words."""

    @property
    def verdict(self) -> str:
        return ", ".join(self.flags) or ("flagged" if self.flagged else "valid")


@dataclass(frozen=True)
class Change:
    index: int
    """Its first run after the change, in the series' points."""
    pct: float
    """The change of the rate, percent (negative: slower)."""
    low_pct: float
    high_pct: float
    p: float
    moved: Mapping[str, tuple[str, str]]
    """What changed between the last run before it and the first after: field -> (old, new)."""

    @property
    def cause(self) -> str:
        if not self.moved:
            return "no captured software changed: hardware or configuration"
        return ", ".join(f"{k} {old} -> {new}" for k, (old, new) in self.moved.items())

    def text(self) -> str:
        return f"{self.pct:+.1f}% [{self.low_pct:+.1f}, {self.high_pct:+.1f}]"


def changes(points: Sequence[Point]) -> list[Change]:
    """The significant change points of a series in time order, oldest first."""
    used = [i for i, p in enumerate(points) if not p.flagged and p.value > 0]
    if len(used) < 2 * MIN_SIDE:
        return []
    logs = [math.log(points[i].value) for i in used]
    found = []
    bounds = [0, *_candidates(logs), len(logs)]
    for before, at, after in zip(bounds, bounds[1:], bounds[2:], strict=False):
        left, right = logs[before:at], logs[at:after]
        judged = _judged(left, right)
        if judged is None:
            continue
        pct, low, high, p = judged
        first = used[at]
        found.append(Change(first, pct, low, high, p, moved_near(points, first)))
    return found


def _candidates(logs: Sequence[float]) -> list[int]:
    """PELT's change points (each the index of the first value after it)."""
    import numpy as np
    import ruptures

    sigma = _noise(logs)
    if sigma == 0:
        sigma = 1e-9
    penalty = PENALTY * sigma**2 * math.log(len(logs))
    found = ruptures.Pelt(model="l2", min_size=MIN_SIDE, jump=1)
    ends = found.fit(np.asarray(logs).reshape(-1, 1)).predict(pen=penalty)
    return [int(end) for end in ends[:-1]]  # the last is the series' end


def _noise(values: Sequence[float]) -> float:
    """The noise's standard deviation from successive differences' median absolute value,
    which a step moves only once (a plain deviation would count the step as noise)."""
    diffs = [abs(b - a) for a, b in itertools.pairwise(values)]
    return statistics.median(diffs) / (0.6745 * math.sqrt(2)) if diffs else 0.0


def _judged(
    left: Sequence[float], right: Sequence[float]
) -> tuple[float, float, float, float] | None:
    """(change %, its 95% interval's ends, p) between two sides' logs; None if not significant."""
    if len(left) < MIN_SIDE or len(right) < MIN_SIDE:
        return None
    found = welch(left, right)
    return found if found[3] < ALPHA else None


def welch(left: Sequence[float], right: Sequence[float]) -> tuple[float, float, float, float]:
    """(change %, its 95% interval's ends, p) from the left logs to the right ones, by Welch's
    t-test on them: the ratio of their geometric means."""
    from scipy import stats

    test = stats.ttest_ind(right, left, equal_var=False)
    ci = test.confidence_interval(0.95)
    diff = statistics.fmean(right) - statistics.fmean(left)
    pct = lambda d: 100 * (math.exp(d) - 1)  # noqa: E731
    return pct(diff), pct(ci.low), pct(ci.high), float(test.pvalue)


@dataclass(frozen=True)
class Between:
    """Two periods' unflagged runs of a series set against each other."""

    pct: float
    """The second period's rate over the first's (geometric means), as a change in percent."""
    low_pct: float
    high_pct: float
    first: int
    second: int
    """How many runs each period had."""


def between(
    points: Sequence[Point], first: Callable[[Point], bool], second: Callable[[Point], bool]
) -> Between | None:
    """The second period's runs against the first's; None where either has fewer than two."""
    a = [math.log(p.value) for p in points if first(p) and not p.flagged and p.value > 0]
    b = [math.log(p.value) for p in points if second(p) and not p.flagged and p.value > 0]
    if len(a) < 2 or len(b) < 2:
        return None
    pct, low, high, _ = welch(a, b)
    return Between(pct, low, high, len(a), len(b))


REACH = 2
"""How many runs either side of a found change its cause is looked for: a step of 2.7 sigma
(8% in 3% noise) is placed within two runs of where it is."""


def moved_near(points: Sequence[Point], index: int) -> dict[str, tuple[str, str]]:
    """What the environment changed between consecutive runs within REACH of a change found
    at `index`: field -> (its value before the first such change, after the last)."""
    moved: dict[str, tuple[str, str]] = {}
    for j in range(max(1, index - REACH), min(len(points), index + REACH + 1)):
        for name, (old, new) in moved_between(points[j - 1].software, points[j].software).items():
            moved[name] = (moved[name][0] if name in moved else old, new)
    return {name: pair for name, pair in moved.items() if pair[0] != pair[1]}


def moved_between(old: Mapping[str, str], new: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The captured fields whose values differ, "-" for one absent on a side."""
    names = sorted(set(old) | set(new))
    return {n: (old.get(n, "-"), new.get(n, "-")) for n in names if old.get(n) != new.get(n)}


def regression(found: Iterable[Change], pct: float) -> Change | None:
    """The newest change of a series if it is a slowdown larger than `pct` percent."""
    newest = max(found, key=lambda c: c.index, default=None)
    if newest is not None and newest.pct < 0 and -newest.pct > pct:
        return newest
    return None
