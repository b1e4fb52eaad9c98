"""The package's shape: the folders are layers that import only downwards, no module imports
itself back at import time, and none is long."""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from pathlib import Path

SRC = Path(__file__).parents[1] / "src"
PACKAGE = SRC / "accelbench"
REVIEW_LINES = 400
MAX_LINES = 600
LAYERS = (
    (
        *("accelbench.errors", "accelbench.inputs", "accelbench.secrets", "accelbench.wire"),
        *("accelbench.workload", "accelbench.workloads"),
    ),
    (
        *("accelbench.records", "accelbench.scenarios$", "accelbench.scenarios.*$"),
        *("accelbench.scenarios.*.record", "accelbench.scenarios.*.settings"),
        *("accelbench.engines$", "accelbench.engines.*$"),
    ),
    ("accelbench.storage", "accelbench.scenarios.*.exports"),
    ("accelbench.analysis", "accelbench.scenarios.*.verdicts", "accelbench.scenarios.*.seeds"),
    ("accelbench.execution",),
    (
        "accelbench.scenarios.epochs",
        "accelbench.scenarios.*.measure",
        "accelbench.scenarios.*.endpoint",
        "accelbench.engines.*.*",
    ),
    ("accelbench.cell",),
    ("accelbench.report", "accelbench.scenarios.*.report"),
    ("accelbench.scenarios.*.plugin",),
    ("accelbench.orchestration",),
    (
        "accelbench.suites",
        "accelbench.cli",
        "accelbench$",
        "accelbench.__main__",
        "accelbench.command",
    ),
    ("accelbench.integrations",),
)
"""From the bottom up: what a result is made of, the scenarios' plug-ins (which describe
their records and settings, torch-free) and the engines' (which cells each can run); the database and its files, which keep what they are
handed, and each scenario's own formats of the field; analysis of results as data, and each
scenario's own verdicts and analysis; how a step executes; how each scenario measures, and
each engine besides torch; the
cell's process; the words, tables and figures, each scenario's own, and the database as the
commands read it (with listings); each scenario's plug-in, what the core reads of it, which
names its hooks in those layers (the registry imports it when first read, never at import
time); where and in what order cells run; the commands. A module imports from its own layer or below."""


def layer(module: str) -> int:
    """The index of the layer a module is in: its longest matching entry wins. An entry names a
    module and the modules under it; "*" stands for any one name, and "$" ends an entry that
    names a module alone."""
    best, found = -1.0, -1
    parts = module.split(".")
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            alone = entry.endswith("$")
            pattern = entry.rstrip("$").split(".")
            if (alone and len(parts) != len(pattern)) or len(parts) < len(pattern):
                continue
            if all(p in ("*", q) for p, q in zip(pattern, parts, strict=False)):
                score = len(pattern) - 0.5 * pattern.count("*")
                if score > best:
                    best, found = score, index
    assert found >= 0, f"{module} is in no layer: add it to LAYERS"
    return found


def _name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports run when the module is: at its top level, outside `if TYPE_CHECKING:`
    blocks; an import inside a function runs when it is called, after every module loaded."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If | ast.Try) and "TYPE_CHECKING" not in ast.unparse(node)[:40]:
            found += [n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)]
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the accelbench modules it imports at import time."""
    modules = {_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif node.module and node.module.startswith("accelbench"):
                # `from P import m` imports module P.m where there is one, else a name of P
                targets = [
                    f"{node.module}.{a.name}"
                    if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                ]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import loop, each once, as the modules around it (Tarjan's strongly connected
    components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    assert (
        "accelbench.records.spec" in graph["accelbench.records.result"]
    )  # the graph is read, not empty
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_loop() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_import_goes_down_the_layers() -> None:
    upward = [
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        for b in sorted(targets)
        if layer(b) > layer(a)
    ]
    assert upward == []


def test_the_layers_place_modules_as_documented() -> None:
    assert layer("accelbench.scenarios.serve") == 1  # a scenario's data: its record, settings
    assert layer("accelbench.scenarios.serve.record") == 1
    assert layer("accelbench.scenarios.serve.plugin") > layer("accelbench.scenarios.serve.report")
    assert layer("accelbench.scenarios.serve.measure") == 5  # its measurement
    assert layer("accelbench.storage.store") < layer("accelbench.analysis.validity")  # keeps data
    assert layer("accelbench.scenarios") == 1  # the registry
    assert layer("accelbench.cli.run") == len(LAYERS) - 2  # below only the integrations


def _measures_elsewhere() -> dict[str, str]:
    """Each engine's measure of a scenario (another framework's half of it), by module: the
    scenario's folder (the one its own measure is in), which that module may import (its
    settings, its record, the kit it shares with its engines)."""
    from accelbench import engines, scenarios

    found = {}
    for name in engines.names():
        for scenario, target in engines.get(name).measures.items():
            own = scenarios.get(scenario).measure
            module = own.partition(":")[0] if isinstance(own, str) else own.__module__
            found[target.partition(":")[0]] = module.rpartition(".")[0]
    return found


def test_only_a_scenario_knows_a_scenario() -> None:
    """Nothing outside scenarios/ imports a scenario's folder (any import, typing-only or inside
    a function) or asks a result for a scenario's record class: the core reads the plug-ins
    through base.py's hooks (series, figures, tables, exports); the shared modules beside the
    folders (base, settings, epochs) are the contract. An engine's measure of a scenario (JAX's
    time to train) is that scenario's, in another framework: it may import its folder."""
    named, own = [], _measures_elsewhere()
    for path in PACKAGE.rglob("*.py"):
        if _name(path).startswith("accelbench.scenarios"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [f"{node.module}.{a.name}" for a in node.names]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            for module in modules:
                parts = module.split(".")
                folder = PACKAGE / "scenarios" / parts[2] if len(parts) > 2 else None
                ours = module.startswith(f"{own.get(_name(path), '-')}.")
                if parts[:2] == ["accelbench", "scenarios"] and folder and folder.is_dir():
                    named += [] if ours else [f"{_name(path)} -> {module}"]
            if isinstance(node, ast.Name) and node.id == "record_of":
                named.append(f"{_name(path)} calls record_of")
    assert named == []


def test_the_records_are_data() -> None:
    """Reading a result needs no torch and no meter: what measures is in execution and cell."""
    loads = (
        "import importlib, pkgutil, sys, accelbench.records as r\n"
        "for m in pkgutil.iter_modules(r.__path__): importlib.import_module(f'{r.__name__}.{m.name}')\n"
        "print(' '.join(n for n in ('torch', 'psutil', 'pynvml', 'amdsmi') if n in sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", loads], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.split() == []


def test_no_module_is_long() -> None:
    """Past REVIEW_LINES a module is a question for its reviewer (a warning in the summary, so
    that the concept, not a count, decides where code goes); past MAX_LINES it is an answer."""
    lengths = {_name(p): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    for name, n in sorted(lengths.items()):
        if n > REVIEW_LINES:
            warnings.warn(f"{name} has {n} lines: does it hold one concept?", stacklevel=1)
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}


def test_the_tests_mirror_the_folders() -> None:
    """A folder of tests names the package folder it tests (the rest are whole-tool tests)."""
    tests = Path(__file__).parent
    folders = {p.parent.name for p in tests.glob("*/__init__.py")}
    assert folders and folders <= {p.name for p in PACKAGE.iterdir() if p.is_dir()}
