"""The registry of scenarios: each is a plug-in (base.Scenario) in a folder of its own, whose
__init__ describes it (torch-free) and whose measure.py measures it.

The built-in ones are plug-ins like any other, named in BUILT_IN and imported when the registry
is first read (so that the registry, which the records read, imports none of them). Besides them,
a scenario comes from a module or .py file named in
$ACCELBENCH_SCENARIOS (comma-separated; cells inherit it) or from an installed package's
`accelbench.scenarios` entry point; either defines a `SCENARIO`. Scenario names are compared
here and nowhere else: the rest of accelbench reads a plug-in's fields.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.errors import AccelbenchError, one_line
from accelbench.scenarios.base import (
    VIEWS,
    ClientScenario,
    DeviceScenario,
    Export,
    Figure,
    Headline,
    Namer,
    Record,
    Scenario,
    Series,
    Settings,
)

if TYPE_CHECKING:
    from accelbench.records.result import Result

__all__ = [
    "ClientScenario",
    "DeviceScenario",
    "Export",
    "Figure",
    "Headline",
    "Record",
    "Scenario",
    "Series",
    "Settings",
    "get",
    "names",
    "record_type",
    "register",
]

PLUGINS_ENV = "ACCELBENCH_SCENARIOS"
BUILT_IN = ("train", "infer", "server", "time_to_train", "generate", "serve", "micro", "loader")
"""The built-in scenarios' folders, in the order commands list them."""
_REGISTRY: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    """Add a scenario; its name must be new and its record's kind its name."""
    if scenario.name in _REGISTRY and _REGISTRY[scenario.name] is not scenario:
        raise ValueError(f"a scenario named {scenario.name!r} is already registered")
    if unknown := scenario.views - VIEWS:
        raise ValueError(
            f"{scenario.name}: no such view {sorted(unknown)}: give some of {sorted(VIEWS)}"
        )
    formats = {e.format: e for s in _REGISTRY.values() for e in s.exports}
    if clash := [e.format for e in scenario.exports if formats.get(e.format, e) != e]:
        raise ValueError(f"{scenario.name}: another scenario exports {clash[0]!r} otherwise")
    hooks: dict[str, object] = {
        "notes": scenario.notes,
        "verdict_rules": scenario.verdict_rules,
        "cell_text": scenario.cell_text,
        "table": scenario.table,
        "findings": scenario.findings,
        **{f"figure {f.name}": f.draw for f in scenario.figures},
        **{f"export {e.format}": e.write for e in scenario.exports},
    }
    if named := [name for name, hook in hooks.items() if isinstance(hook, str)]:
        raise ValueError(
            f"{scenario.name}: {named[0]} is named by a string: hand the function itself "
            "(only measure is imported by its name)"
        )
    record = scenario.record
    if record is not None and record.model_fields["kind"].default != scenario.name:
        raise ValueError(f"{record.__name__}.kind must default to {scenario.name!r}")
    _REGISTRY[scenario.name] = scenario
    return scenario


def get(name: str) -> Scenario:
    """The scenario of this name; ValueError naming the known ones for any other."""
    if _loaded and name in _REGISTRY:  # a table asks per cell: no environment read each time
        return _REGISTRY[name]
    _load_plugins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}: give one of {', '.join(names())}") from None


def names() -> list[str]:
    _load_plugins()
    return list(_REGISTRY)


def all_scenarios() -> list[Scenario]:
    _load_plugins()
    return list(_REGISTRY.values())


def loadable() -> list[Scenario]:
    """The scenarios, leaving out plug-ins that cannot be loaded: for what lists knobs (the
    command line as it is built), so that a broken plug-in is said in one line where a cell
    names its scenario, not as a traceback before any command runs."""
    with contextlib.suppress(AccelbenchError):
        _load_plugins()
    return list(_REGISTRY.values())


def with_objective(objective: str) -> tuple[str, ...]:
    """The scenarios whose results answer an objective of `accelbench recommend`."""
    return tuple(s.name for s in all_scenarios() if objective in s.objectives)


def in_view(view: str) -> tuple[str, ...]:
    """The scenarios whose results appear in a table or figure of the report."""
    assert view in VIEWS, view
    return tuple(s.name for s in all_scenarios() if view in s.views)


def tables(results: Sequence[Result]) -> list[Any]:
    """Each scenario's own table over its results (Scenario.table), those with rows."""
    found = (s.table(own) for s, own in _each(results) if s.table)
    return [grid for grid in found if grid is not None]


def findings(results: Sequence[Result], name: Namer) -> list[str]:
    """Each scenario's lines over its results (Scenario.findings)."""
    return [line for s, own in _each(results) if s.findings for line in s.findings(own, name)]


def _each(results: Sequence[Result]) -> Iterator[tuple[Scenario, list[Result]]]:
    """Each scenario of the results, with its results, in the order the registry has them."""
    by_name: dict[str, list[Result]] = {}
    for r in results:
        by_name.setdefault(r.spec.scenario, []).append(r)
    return ((s, by_name[s.name]) for s in all_scenarios() if s.name in by_name)


def exports() -> dict[str, Export]:
    """The field's formats the scenarios' results are exported in, by name (Scenario.exports;
    the registry's loadable ones, as the command line lists them)."""
    return {export.format: export for s in loadable() for export in s.exports}


def record_type(kind: str) -> type[Record]:
    """The record class a stored record's kind names."""
    record = get(kind).record
    if record is None:
        raise ValueError(f"scenario {kind!r} keeps no record of its own")
    return record


_loaded: list[str] = []
"""The value of $ACCELBENCH_SCENARIOS the registry was last loaded with."""
_modules: set[str] = set()
"""The plug-in modules registered so far."""


def _load_plugins() -> None:
    """Import the built-in plug-ins, then those $ACCELBENCH_SCENARIOS and entry points name,
    once per value."""
    wanted = os.environ.get(PLUGINS_ENV, "")
    if _loaded == [wanted]:
        return
    _loaded[:] = [wanted]
    try:
        for name in BUILT_IN:
            register(importlib.import_module(f"{__name__}.{name}.plugin").SCENARIO)
        for point in importlib.metadata.entry_points(group="accelbench.scenarios"):
            register(point.load())
        for name in filter(None, (n.strip() for n in wanted.split(","))):
            if name in _modules:  # loaded before, under another value of the variable
                continue
            found = getattr(_module(name), "SCENARIO", None)
            if not isinstance(found, Scenario):
                raise AccelbenchError(
                    f"{PLUGINS_ENV}: {name} defines no SCENARIO: give it one, a scenarios.Scenario"
                )
            register(found)
            _modules.add(name)
    except BaseException:
        _loaded.clear()  # and try again next time, not half-registered
        raise


def _module(name: str) -> ModuleType:
    """The module a name or a .py file's path gives."""
    path = Path(name)
    if name.endswith(".py") and not path.is_file():
        raise AccelbenchError(
            f"{PLUGINS_ENV}: no Python file at {name}: give a module's name or a .py file's path"
        )
    try:
        if not name.endswith(".py"):
            return importlib.import_module(name)
        spec = importlib.util.spec_from_file_location(f"accelbench_scenario_{path.stem}", path)
        assert spec is not None and spec.loader is not None  # a .py file that exists
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module: whatever it raises, say where
        raise AccelbenchError(f"{PLUGINS_ENV}: cannot import {name}: {one_line(exc)}") from exc
    return module
