"""Acceptance: does each stored result reach its baseline? The baseline is a centre's own file of
figures or the fleet's median (analysis.fleet); the rule, a share of the baseline, is data:
acceptance.toml ships it (at least 95% of the baseline, as NVIDIA asks of an Exemplar cloud:
"> 95% baseline performance for all workloads", github.com/NVIDIA/dgxc-benchmarking,
Exemplar_validation.md) and `--rule FILE` or `--min-ratio` overrides it.

A baseline file is CSV, one figure a row: workload and value are required; scenario (default
train), platform (a part of the results' platform name, any case), batch_size, precision and
replicas narrow the row when given; unit and source are carried to the verdict. A result takes
the matching row that names the most of those columns.
"""

from __future__ import annotations

import csv
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path

from pydantic import Field, ValidationError

from accelbench import inputs
from accelbench.analysis import fleet
from accelbench.errors import AccelbenchError, first_invalid
from accelbench.records.frozen import Frozen
from accelbench.records.result import Result, cell_key

NARROWING = ("scenario", "platform", "batch_size", "precision", "replicas")


class Rule(Frozen):
    min_ratio: float = Field(gt=0, le=10)
    """A result passes when its headline is at least this share of its baseline."""
    judge: str = Field(pattern="^(value|interval)$")
    """value: the headline must reach it; interval: the upper end of its 95% interval may (a
    result that cannot be told from one that passes passes)."""


class Baseline(Frozen):
    workload: str = Field(min_length=1)
    value: float = Field(gt=0)
    scenario: str = "train"
    platform: str | None = None
    batch_size: int | None = Field(default=None, gt=0)
    precision: str | None = None
    replicas: int | None = Field(default=None, gt=0)
    unit: str = ""
    source: str = ""

    def matches(self, result: Result) -> bool:
        s = result.spec
        return (
            (s.workload, s.scenario) == (self.workload, self.scenario)
            and (self.platform is None or self.platform.lower() in result.platform.lower())
            and self.batch_size in (None, s.batch_size)
            and self.precision in (None, s.precision)
            and self.replicas in (None, s.replicas)
        )

    @property
    def narrowed_by(self) -> int:
        return sum(getattr(self, name) not in (None, "train") for name in NARROWING)


def shipped_rule() -> Rule:
    text = resources.files("accelbench.analysis").joinpath("acceptance.toml").read_text()
    return Rule.model_validate(tomllib.loads(text))


def load_rule(path: Path) -> Rule:
    """A rule file, over the shipped rule's settings; any problem is one line naming the file."""
    try:
        given = tomllib.loads(inputs.read_text(path, "rule file"))
        return Rule.model_validate(shipped_rule().model_dump() | given)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValidationError) as exc:
        raise AccelbenchError(f"rule file {path}: {_why(exc)}") from None


def load_baselines(path: Path) -> list[Baseline]:
    """The rows of a baseline file; any problem is one line naming the file and row."""
    try:
        with inputs.opened(path, "baseline file", inputs.TABLE_BYTES) as file:
            rows = list(csv.DictReader(file))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AccelbenchError(f"baseline file {path}: {_why(exc)}") from None
    baselines = []
    for number, row in enumerate(rows, start=2):
        given = {k.strip(): v.strip() for k, v in row.items() if k and v and v.strip()}
        try:
            baselines.append(Baseline.model_validate(given))
        except ValidationError as exc:
            raise AccelbenchError(f"baseline file {path}, row {number}: {_why(exc)}") from None
    if not baselines:
        raise AccelbenchError(f"baseline file {path} has no rows: give workload,value,... rows")
    return baselines


def _why(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        where, why = first_invalid(exc)
        return f"{where}: {why}" if where else why
    return getattr(exc, "strerror", None) or str(exc)


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NO_BASELINE = "no baseline"


@dataclass(frozen=True)
class Judged:
    result: Result
    outcome: Outcome
    baseline: float | None = None
    source: str = ""

    @property
    def ratio(self) -> float | None:
        value = self.result.items_per_s
        return value / self.baseline if value is not None and self.baseline else None


def judge(
    results: Sequence[Result],
    rule: Rule,
    baselines: Sequence[Baseline] = (),
    use_fleet: bool = False,
) -> list[Judged]:
    """Each result against its baseline: the most specific matching row of `baselines`, or with
    `use_fleet` the median of its cell across the fleet's nodes (a judged fleet cell only)."""
    medians = {}
    if use_fleet:
        for cell in fleet.cells(results):
            if cell.judged:
                key = (cell.example.platform, cell_key(cell.example, platform=False))
                medians[key] = (cell.median, f"fleet median of {len(cell.nodes)} nodes")
    judged = []
    for r in results:
        if use_fleet:
            found = medians.get((r.platform, cell_key(r, platform=False)))
        else:
            rows = [b for b in baselines if b.matches(r)]
            best = max(rows, key=lambda b: b.narrowed_by, default=None)
            found = None if best is None else (best.value, best.source)
        if found is None:
            judged.append(Judged(r, Outcome.NO_BASELINE))
            continue
        value, source = found
        judged.append(Judged(r, _outcome(r, value, rule), value, source))
    return judged


def _outcome(result: Result, baseline: float, rule: Rule) -> Outcome:
    if result.status != "ok" or result.items_per_s is None:
        return Outcome.FAIL  # failed, diverged or unrated: it reached nothing to accept
    reached = result.items_per_s
    if rule.judge == "interval" and result.items_per_s_ci is not None:
        reached = result.items_per_s_ci[1]
    return Outcome.PASS if reached >= rule.min_ratio * baseline else Outcome.FAIL
