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
from typer.core import TyperCommand

from accelbench.records.spec import knobs, owners


def spec_help(field: str) -> str:
    return knobs()[field].description or ""


def job_help(field: str) -> str:
    from accelbench.orchestration.slurm import JobSpec

    return JobSpec.model_fields[field].description or field.replace("_", " ").capitalize() + "."


OPTION_NAMES = {"repeat": "repeats", "ci_pct": "ci", "slo_ttft_ms": "slo", "slo_tpot_ms": "slo"}
"""Spec fields whose command-line parameter has another name."""
ENV_DEFAULTS = {"platform": ["ACCELBENCH_PLATFORM", "SLURM_CLUSTER_NAME"]}
"""Spec fields whose option defaults to the first of these environment variables that is set:
a centre labels its clusters once, in the environment its jobs start in."""

F = TypeVar("F", bound=Callable[..., Any])


def choice(name: str, values: list[str]) -> Any:
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
        kind = choice(name, [str(v) for v in get_args(inner)])
    elif get_origin(inner) in (Union, types.UnionType):  # a count or "auto": the spec reads it
        kind = str
    return kind | None if optional else kind


def field_options(
    names: Iterable[str], model: type[BaseModel] | None = None
) -> list[inspect.Parameter]:
    """One option per field of `model` (None: the spec's knobs, its scenarios' own ones under a
    heading of their scenario's name in --help): its name as --kebab-case, its type, default and
    help from the model, so a new field is on the command line without an edit here."""
    fields = knobs() if model is None else model.model_fields
    params = []
    for name in names:
        field = fields[name]
        kind = _option_type(name, field.annotation)
        default = field.get_default(call_default_factory=True)
        flag = f"--{name.replace('_', '-')}"
        decls = [f"{flag}/--no-{flag[2:]}" if default else flag] if kind is bool else []
        option = typer.Option(
            *decls,
            help=field.description or "",
            envvar=ENV_DEFAULTS.get(name),
            rich_help_panel=panel(name) if model is None else None,
        )
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=Annotated[kind, option],
            )
        )
    return params


def panel(name: str) -> str | None:
    """The --help heading of a spec knob: the scenarios that own it, None for a shared one."""
    found = [s.name for s in owners(name)]
    return f"Options of --scenario {' and '.join(found)}" if found else None


def with_fields(names: Iterable[str], model: type[BaseModel] | None = None) -> Callable[[F], F]:
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


class PanelledCommand(TyperCommand):
    """A command whose plain --help lists its options under their headings (a scenario's own
    knobs apart from the shared ones), as typer does only when it draws help with rich."""

    def format_options(self, ctx: Any, formatter: Any) -> None:  # typer's own click's types
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            heading = "Arguments" if param.param_type_name == "argument" else "Options"
            sections.setdefault(getattr(param, "rich_help_panel", None) or heading, []).append(
                record
            )
        for heading, records in sections.items():
            with formatter.section(heading):
                formatter.write_dl(records)
