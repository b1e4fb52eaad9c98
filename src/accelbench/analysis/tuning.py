"""`accelbench tune`: measure what advice needs, within a time budget.

The largest micro batch that fits and the fastest one are found by a bounded search: doubling
from a start until memory runs out (or a maximum), bisecting between the last batch that fit and
the first that did not, then trying the midpoints around the fastest batch so far. Each trial is
one cell in a fresh process (an out-of-memory trial cannot poison the next) stored like any run,
so a search run again reuses what it measured. Then the fastest batch at each device count
asked for. The largest batch that fits is rarely the fastest (seed 003, and the reason
Lightning's batch-size finder, which stops at the largest, is not enough).

The other question of memory planning, the fewest devices a sharded model trains on at a given
micro batch, is a search of the same kind over the device count (`fewest_devices`): from the
count the weights and optimizer state alone need, doubling until a trial fits, then bisecting
down to the fewest that does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from accelbench.records.result import MEASURED, Result

Measure = Callable[[int, int], Result]
"""Runs (and stores) the cell at this micro batch and replica count."""


class _Spent(Exception):
    pass


@dataclass
class Budget:
    seconds: float
    started: float = field(default_factory=time.monotonic)
    last_trial_s: float = 0.0

    def allows_another(self) -> bool:
        """Whether one more trial, as long as the last one, still ends within the budget."""
        return time.monotonic() - self.started + self.last_trial_s <= self.seconds


@dataclass
class Search:
    trials: dict[int, Result] = field(default_factory=dict)
    """Micro batch to its result, in the order tried."""
    scaling: dict[int, Result] = field(default_factory=dict)
    """Replica count to the fastest batch's result there."""
    spent: bool = False
    """The budget ended the search before it was done."""

    @property
    def fits(self) -> list[int]:
        return sorted(b for b, r in self.trials.items() if r.status in MEASURED)

    @property
    def first_oom(self) -> int | None:
        return min((b for b, r in self.trials.items() if r.status == "oom"), default=None)

    @property
    def largest_fit(self) -> int | None:
        oom = self.first_oom
        below = [b for b in self.fits if oom is None or b < oom]
        return below[-1] if below else None

    @property
    def fastest(self) -> int | None:
        ok = [b for b, r in self.trials.items() if r.status == "ok" and r.metrics]
        return max(ok, key=lambda b: self.trials[b].items_per_s or 0, default=None)


def search(
    measure: Measure,
    *,
    start: int = 1,
    max_batch: int = 4096,
    budget: Budget,
    resolution: float = 0.25,
    replicas: Sequence[int] = (),
) -> Search:
    """The bounded search above; `resolution` is how close (as a share of the batch) bisection
    brings the largest batch that fits to the first that does not, and refinement the batches
    around the fastest."""
    found = Search()

    def trial(batch: int, num_replicas: int = 1) -> Result:
        if num_replicas == 1 and batch in found.trials:
            return found.trials[batch]
        if not budget.allows_another():
            raise _Spent
        began = time.monotonic()
        result = measure(batch, num_replicas)
        budget.last_trial_s = time.monotonic() - began
        if num_replicas == 1:
            found.trials[batch] = result
        else:
            found.scaling[num_replicas] = result
        return result

    try:
        batch = start
        while batch <= max_batch and trial(batch).status in MEASURED:
            batch *= 2
        low, high = found.largest_fit, found.first_oom
        while low is not None and high is not None and high - low > max(1, resolution * low):
            middle = (low + high) // 2
            low, high = (middle, high) if trial(middle).status in MEASURED else (low, middle)
        for _ in range(3):  # midpoints around the fastest, while they are far enough apart
            todo = _midpoints(found, resolution)
            if not todo:
                break
            for b in todo:
                trial(b)
        for n in replicas:
            if n > 1 and found.fastest is not None:
                trial(found.fastest, n)
    except _Spent:
        found.spent = True
    return found


def _midpoints(found: Search, resolution: float) -> list[int]:
    """Untried batches halfway between the fastest and its measured neighbours that fit, where
    a neighbour is more than `resolution` of the fastest batch away."""
    best, fits = found.fastest, found.fits
    if best is None:
        return []
    i = fits.index(best)
    neighbours = [
        n
        for n in fits[max(i - 1, 0) : i] + fits[i + 1 : i + 2]
        if abs(n - best) > resolution * best
    ]
    middles = {(best + n) // 2 for n in neighbours}
    return sorted(m for m in middles if m not in found.trials and m != best)


@dataclass
class DeviceSearch:
    trials: dict[int, Result] = field(default_factory=dict)
    """Device count to its result, in the order tried."""
    spent: bool = False

    @property
    def fewest(self) -> int | None:
        """The fewest devices tried on which the cell fitted (and ran)."""
        return min((n for n, r in self.trials.items() if r.status in MEASURED), default=None)


def fewest_devices(
    measure: Callable[[int], Result], *, start: int, most: int, budget: Budget
) -> DeviceSearch:
    """The fewest devices, from `start` up to `most`, on which `measure` (the cell sharded over
    that many) does not run out of memory: doubling until one fits, then bisecting between the
    last count that ran out and the first that fitted. A failure other than memory ends it: more
    devices would not cure it."""
    found = DeviceSearch()

    def trial(n: int) -> Result:
        if not budget.allows_another():
            raise _Spent
        began = time.monotonic()
        found.trials[n] = measure(n)
        budget.last_trial_s = time.monotonic() - began
        return found.trials[n]

    try:
        n, short = start, None
        while (status := trial(n).status) == "oom" and n < most:
            short, n = n, min(2 * n, most)
        if status not in MEASURED:
            return found
        while short is not None and n - short > 1:
            middle = (short + n) // 2
            short, n = (short, middle) if trial(middle).status in MEASURED else (middle, n)
    except _Spent:
        found.spent = True
    return found
