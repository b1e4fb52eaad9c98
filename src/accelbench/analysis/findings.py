"""The analysed view of a set of results, computed once for every table, line and figure of a
report: the repeats of each cell, the like-with-like speed-ups, and each result's verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from accelbench.analysis import scaling, validity
from accelbench.records.result import MEASURED, Result


@dataclass
class Findings:
    """Results are looked up by identity: the view holds them, so no id is reused while it
    lives, and two records of one cell (a result and its edited copy) can share a key."""

    results: Sequence[Result]
    _verdicts: dict[int, str] = field(default_factory=dict, repr=False)

    @cached_property
    def groups(self) -> dict[str, list[Result]]:
        """The repeats of each cell, by cell_key."""
        return validity.repeat_groups(self.results)

    @cached_property
    def scalings(self) -> list[scaling.Scaling]:
        """Every multi-replica result with its measured one-replica base."""
        return scaling.scaling(self.results)

    @cached_property
    def _speedups(self) -> dict[int, scaling.Scaling]:
        return {id(s.result): s for s in self.scalings if s.speedup is not None}

    def speedup(self, result: Result) -> scaling.Scaling | None:
        """The like-with-like speed-up of a multi-replica result over its one-replica base."""
        return self._speedups.get(id(result))

    def siblings(self, result: Result) -> list[Result]:
        """The other repeats of the result's cell."""
        return validity.siblings(result, self.groups)

    def verdict_text(self, result: Result) -> str:
        """ "valid", the flags that apply (its repeats' spread included), or the status of a
        result that holds no measurement; computed once per result."""
        if result.status not in MEASURED:
            return result.status
        if id(result) not in self._verdicts:
            self._verdicts[id(result)] = validity.verdict_text(result, self.siblings(result))
        return self._verdicts[id(result)]
