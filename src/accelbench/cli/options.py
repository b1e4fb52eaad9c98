"""The options derived from a model's fields (RunSpec's, a job's): name, type, default and help
come from the field, so a new spec field is on the command line without an edit here."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterable
from enum import Enum, StrEnum
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel

from accelbench.records.spec import RunSpec


def spec_help(field: str) -> str:
    return RunSpec.model_fields[field].description or ""


def job_help(field: str) -> str:
    from accelbench.orchestration.slurm import JobSpec

    return JobSpec.model_fields[field].description or field.replace("_", " ").capitalize() + "."


OPTION_NAMES = {"repeat": "repeats", "ci_pct": "ci", "slo_ttft_ms": "slo", "slo_tpot_ms": "slo"}
"""Spec fields whose command-line parameter has another name."""
ENV_DEFAULTS = {"platform": ["ACCELBENCH_PLATFORM", "SLURM_CLUSTER_NAME"]}
"""Spec fields whose option defaults to the first of these environment variables that is set:
a centre labels its clusters once, in the environment its jobs start in."""

F = TypeVar("F", bound=Callable[..., Any])


def _choice(name: str, values: list[str]) -> Any:
    """A type the command line offers as a choice of these values."""
    return StrEnum(name, {v: v for v in values})


def _option_type(name: str, annotation: Any) -> Any:
    """The command-line type of a field's annotation: a Literal becomes a choice of its values,
    `X | None` an optional X, any other union text that the spec validates."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    optional = get_origin(annotation) in (Union, types.UnionType) and len(args) == 1
    inner = args[0] if optional else annotation
    kind: Any = inner
    if get_origin(inner) is Literal:
        kind = _choice(name, [str(v) for v in get_args(inner)])
    elif get_origin(inner) in (Union, types.UnionType):  # a count or "auto": the spec reads it
        kind = str
    return kind | None if optional else kind


def field_options(
    names: Iterable[str], model: type[BaseModel] = RunSpec
) -> list[inspect.Parameter]:
    """One option per field of `model`: its name as --kebab-case, its type, default and help
    from the model, so a new field is on the command line without an edit here."""
    params = []
    for name in names:
        field = model.model_fields[name]
        kind = _option_type(name, field.annotation)
        default = field.get_default(call_default_factory=True)
        flag = f"--{name.replace('_', '-')}"
        decls = [f"{flag}/--no-{flag[2:]}" if default else flag] if kind is bool else []
        option = typer.Option(*decls, help=field.description or "", envvar=ENV_DEFAULTS.get(name))
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[kind, option],
            )
        )
    return params


def with_fields(names: Iterable[str], model: type[BaseModel] = RunSpec) -> Callable[[F], F]:
    """Give a command's `**fields` the options of these model fields (field_options); a
    choice arrives as its plain value."""

    def wrap(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]

        @functools.wraps(command)
        def call(*args: Any, **kwargs: Any) -> Any:
            plain = {k: v.value if isinstance(v, Enum) else v for k, v in kwargs.items()}
            return command(*args, **plain)

        call.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *field_options(names, model)]
        )
        return call  # type: ignore[return-value]

    return wrap
