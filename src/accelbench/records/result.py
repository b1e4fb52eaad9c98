"""The result record: one per cell, with its spec and environment inside, failed cells too."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from pydantic import (
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from accelbench import scenarios
from accelbench.records.environment import Environment
from accelbench.records.frozen import Frozen, kept, last, shared
from accelbench.records.metrics import NO_CPU_PEAK, Metrics
from accelbench.records.spec import (
    RunSpec,
    hashed,
    identity_text,
    sorted_json,
    spec_dump,
    stable_text,
)
from accelbench.scenarios import Headline

Status = Literal["ok", "diverged", "not-converged", "oom", "error", "timeout", "interrupted"]
"""ok: measured; diverged: measured, but the loss became NaN or infinite (or, in time-to-train,
ran away), so the throughput is not a valid result; not-converged: time-to-train measured, but the
budget ended before the target; oom: out of memory; error: the cell failed (see reason);
timeout: killed after its time limit; interrupted: stopped by SIGTERM or Ctrl-C (a sweep run
again runs it again)."""
MEASURED: tuple[Status, ...] = ("ok", "diverged", "not-converged")
"""Statuses whose result holds metrics."""


class Result(Frozen):
    key: str
    """Stable hash of spec and platform fingerprint: the same cell on the same platform."""
    spec: RunSpec
    env: Environment
    status: Status
    reason: str | None = None
    """One line saying why, for any status but ok."""
    detail: str | None = None
    """The end of the traceback or of the child's output, for failures."""
    metrics: Metrics | None = None
    created_at: datetime
    wall_s: float | None = None
    """The whole cell as its launcher saw it: process start, imports, set-up and measurement."""
    argv: list[str] | None = None
    """The command line of the sweep that ran the cell (None: made in this process, or before
    it was kept)."""
    tags: dict[str, str] = Field(default_factory=dict)
    """The user's labels of the run (--tag KEY=VALUE: a job id, a ticket, a node name): kept
    and exported, never part of the key."""
    log_path: str | None = None
    """The cell's own output (its prints, torch's and NCCL's warnings), kept in the log
    directory (connect.log_dir); None: made in this process, or before logs were kept."""

    @field_validator("spec", "env", mode="wrap")
    @classmethod
    def _shared(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        """An import's equal specs and environments, validated once (frozen.shared)."""
        return shared(value, handler, info)

    @field_validator("created_at")
    @classmethod
    def _aware(cls, when: datetime) -> datetime:
        """A time without a zone (an imported record) is taken as UTC, as accelbench writes
        them: times are compared and sorted across records."""
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)

    @classmethod
    def new(
        cls,
        spec: RunSpec,
        env: Environment,
        status: Status,
        *,
        reason: str | None = None,
        detail: str | None = None,
        metrics: Metrics | None = None,
    ) -> Result:
        """A result made now, keyed by its spec and platform."""
        return cls(
            key=result_key(spec, env),
            spec=spec,
            env=env,
            status=status,
            reason=reason,
            detail=detail,
            metrics=metrics,
            created_at=datetime.now(UTC),
        )

    @property
    def platform(self) -> str:
        """What the numbers are of: the centre's label (spec.platform: a cluster or partition)
        with the device model, "jureca-dc (NVIDIA A100-SXM4-40GB)", else the device model alone
        (as every record made before labels reads); for serve, which measures a server from its
        client, the server's platform as the user named it, else its endpoint (the client's
        host stays in env)."""
        if isinstance(scenarios.get(self.spec.scenario), scenarios.ClientScenario):
            return self.spec.platform or f"server at {self.spec.knob('endpoint')}"
        label = self.spec.platform
        return f"{label} ({self.env.platform})" if label else self.env.platform

    @property
    def device_model(self) -> str:
        """The device model alone, without the centre's label: what published figures are
        matched by (for serve: the server's platform, whose devices the client cannot see)."""
        client = isinstance(scenarios.get(self.spec.scenario), scenarios.ClientScenario)
        return self.platform if client else self.env.platform

    @property
    def overhead_s(self) -> float | None:
        """Cell time outside the measured epochs (process start, imports, model build)."""
        if self.wall_s is None or self.metrics is None:
            return None
        return self.wall_s - self.metrics.measure_s

    @model_validator(mode="before")
    @classmethod
    def _no_cpu_peak(cls, data: Any) -> Any:
        """Records stored when a CPU's peak was measured per cell: that peak is dropped."""
        if not isinstance(data, dict):
            return data
        env, metrics = data.get("env"), data.get("metrics")
        if not isinstance(env, dict) or env.get("device_type") != "cpu":
            return data
        if not isinstance(metrics, dict) or not isinstance(flops := metrics.get("flops"), dict):
            return data
        if str(flops.get("peak_source")).startswith("measured"):
            update = {"flops": flops | {"peak_per_s": None, "peak_source": NO_CPU_PEAK}}
            data = data | {"metrics": metrics | update}
        return data

    @property
    def headline(self) -> Headline | None:
        """The number the result is read by, its unit and interval, as its scenario defines it
        (the delivered rate over the steady state, unless the scenario says otherwise); found
        once for the last result asked (a listing reads it 14 times)."""
        return _headline(self)

    @property
    def items_per_s(self) -> float | None:
        """The headline's value: the delivered rate across the steady state; for the server
        scenario, the query rate sustained within its bound (None where none was), never its
        capacity; for serve, the goodput at the reported rate (None where no rate met the
        SLO)."""
        headline = self.headline
        return None if headline is None else headline.value

    @property
    def items_per_s_ci(self) -> tuple[float, float] | None:
        """The headline's 95% interval (None where it has none: too few steady steps, or a
        server's sustained rate, from one trial)."""
        headline = self.headline
        return None if headline is None else headline.interval

    @property
    def num_devices(self) -> int:
        """Devices the cell ran on: replicas x pipeline stages."""
        return self.spec.num_processes


@last
def _headline(result: Result) -> Headline | None:
    return None if result.metrics is None else scenarios.get(result.spec.scenario).headline(result)


def measured(results: Sequence[Result], view: str | None = None) -> list[Result]:
    """The results that hold metrics, of the scenarios that appear in a view of the report
    (Scenario.views; None: of every scenario)."""
    shown = scenarios.in_view(view) if view else None
    return [
        r
        for r in results
        if (shown is None or r.spec.scenario in shown) and r.status in MEASURED and r.metrics
    ]


def result_key(spec: RunSpec, env: Environment) -> str:
    """The stored record's key: one per cell, repeat and environment (stable_hash of the spec's
    identity and the environment's fingerprint, each one's text made once)."""
    return hashed(identity_text(spec), _fingerprint_text(env))


@kept
def _fingerprint_text(env: Environment) -> str:
    """The environment's fingerprint as its results' keys hash it."""
    return stable_text(env.fingerprint())


ANY_BATCH = ("batch_size", "grad_accum", "seed")
"""cell_key's `ignore` for the same configuration at any micro batch (and accumulation, and
seed): the cells of a batch sweep."""


def cell_key(
    result: Result, *, ignore: Iterable[str] = (), platform: bool = True, **fields: object
) -> str:
    """Which cell a result measured, the one grouping key: its spec without the repeat index
    and the `ignore`d fields, with `fields` replaced, and with `platform`, its environment.
    Repeats of a cell share it; so do a batch sweep's cells with `ignore=("batch_size",)`, and
    a multi-replica cell and its one-replica base with `replicas=1`."""
    return cell_of(
        spec_dump(result.spec), result.env.fingerprint() if platform else None, ignore, **fields
    )


def cell_hash(
    result: Result, *, ignore: Iterable[str] = (), platform: bool = True, **fields: int | str
) -> str:
    """cell_key, hashed short: what a stored listing keeps of it. The key's text is its spec's
    part, then its environment's, each written by orjson as sorted_json writes the whole; so the
    spec's part is hashed once a spec and variant (an import's records share their specs: a
    listing hashes six), and the hash is carried on with the environment's part."""
    ignore = tuple(ignore)
    variant = (ignore, *fields.items())
    started = _cell_hashes(result.spec)
    if variant not in started:
        cell = _cell(spec_dump(result.spec), ignore, fields)
        try:
            text = orjson.dumps(cell, option=orjson.OPT_SORT_KEYS)
            started[variant] = hashlib.sha256(b"[" + text + b",")
        except orjson.JSONEncodeError:  # an integer past 64 bits: json writes the key whole
            started[variant] = None
    begun = started[variant]
    ending = _fingerprint_end(result.env) if platform else b"null]"
    if begun is None or ending is None:
        key = cell_key(result, ignore=ignore, platform=platform, **fields)
        return hashlib.sha256(key.encode()).hexdigest()[:20]
    carried = begun.copy()
    carried.update(ending)
    return carried.hexdigest()[:20]


@kept
def _cell_hashes(spec: RunSpec) -> dict[tuple[object, ...], hashlib._Hash | None]:
    """The hashes begun with the spec's part of its cell keys, by cell_hash's variant (its
    ignored and replaced fields), filled as they are asked for (None: json writes that key
    whole)."""
    return {}


@kept
def _fingerprint_end(env: Environment) -> bytes | None:
    """The environment's part of its cell keys, as orjson writes it (None where it cannot)."""
    try:
        return orjson.dumps(env.fingerprint(), option=orjson.OPT_SORT_KEYS) + b"]"
    except orjson.JSONEncodeError:
        return None


def cell_of(
    spec: dict[str, Any],
    fingerprint: dict[str, object] | None,
    ignore: Iterable[str] = (),
    **fields: object,
) -> str:
    """cell_key of a spec as model_dump(mode="json") writes it and its environment's
    fingerprint (None: without the platform), as a listing keeps them (report.listing)."""
    return sorted_json([_cell(spec, ignore, fields), fingerprint])


def _cell(spec: dict[str, Any], ignore: Iterable[str], fields: dict[str, Any]) -> dict[str, Any]:
    """A spec's dump as its cell keys hold it: without the repeat index, the `ignore`d fields
    null and `fields` replaced."""
    cell = spec | dict.fromkeys(ignore) | fields
    del cell["repeat"]
    return cell
