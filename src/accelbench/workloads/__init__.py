"""The workload registry, and the names that reach past it.

A workload name is one of:
- a registered name (`accelbench list`): a factory whose keyword arguments (image_size, seq_len,
  num_layers, ...) are the seeds' shapes, overridable with model args;
- `timm/<model>`: any timm model as an image classifier; model args go to timm.create_model;
- `hf/<model_type>`: any transformers architecture as a language model; model args override its
  config, plus seq_len;
- `path/to/file.py:function` or `package.module:function`: a user's function returning a Workload,
  called with the model args;
- `served/<model>`: the model an OpenAI-compatible server serves under that name (it may hold
  slashes, as hub ids do), measured through the server by the serve scenario, never built here;
- `micro/<kind>` (MICRO): a measurement of the device itself, no model, by the micro scenario.

Factories import torch, timm and transformers inside their bodies, so listing the registry stays
instant. The first line of a factory's docstring is the description `accelbench list` shows.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from accelbench.errors import AccelbenchError
from accelbench.workload import Workload
from accelbench.workloads import autoencoder, experts, language, sequence, toy, vision

WORKLOADS: dict[str, Callable[..., Workload]] = {
    "resnet50": vision.resnet50,
    "resnext101_32x4d": vision.resnext101_32x4d,
    "efficientnet_b0": vision.efficientnet_b0,
    "efficientnet_b4": vision.efficientnet_b4,
    "mobilenetv3_small": vision.mobilenetv3_small,
    "mobilenetv3_large": vision.mobilenetv3_large,
    "vit_base_16": vision.vit_base_16,
    "vit_base_16_finetune": vision.vit_base_16_finetune,
    "swin_tiny": vision.swin_tiny,
    "swin_base": vision.swin_base,
    "swin_large": vision.swin_large,
    "unet_medical": vision.unet_medical,
    "efficientdet_d0": vision.efficientdet_d0,
    "efficientdet_d4": vision.efficientdet_d4,
    "bert_base_squad": language.bert_base_squad,
    "bert_large_squad": language.bert_large_squad,
    "bert_base_pretrain_sl128": language.bert_base_pretrain_sl128,
    "bert_base_pretrain_sl512": language.bert_base_pretrain_sl512,
    "bert_large_pretrain_sl128": language.bert_large_pretrain_sl128,
    "bert_large_pretrain_sl512": language.bert_large_pretrain_sl512,
    "gpt2_small": language.gpt2_small,
    "gpt2_medium": language.gpt2_medium,
    "gpt2_large": language.gpt2_large,
    "llama3_2_1b": language.llama3_2_1b,
    "llama3_2_3b": language.llama3_2_3b,
    "llama3_1_8b": language.llama3_1_8b,
    "llama3_1_70b": language.llama3_1_70b,
    "llama2_70b": language.llama2_70b,
    "llama3_tiny": language.llama3_tiny,
    "gpt_oss_20b": experts.gpt_oss_20b,
    "gpt_oss_120b": experts.gpt_oss_120b,
    "mixtral_8x7b": experts.mixtral_8x7b,
    "moe_tiny": experts.moe_tiny,
    "lstm": sequence.lstm,
    "conformer_medium": sequence.conformer_medium,
    "gin": sequence.gin,
    "autoencoder": autoencoder.autoencoder,
    "lenet5": vision.lenet5,
    "tiny_mlp": toy.tiny_mlp,
}

ModelArgs = Mapping[str, int | float | bool | str]


def describe(name: str) -> str:
    """The one-line description of a registered workload."""
    doc = WORKLOADS[name].__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
MICRO: dict[str, dict[str, type]] = {
    "matmul": {"n": int, "m": int, "k": int},
    "triad": {"mib": int},
    "copy": {"mib": int, "direction": str, "pageable": bool},
    **{collective: {"bytes": int, "in_place": bool} for collective in COLLECTIVES},
}
"""The device's own measurements (scenarios/micro), with the model args each takes."""


def check_name(name: str) -> str:
    """Return `name` if it has the form of a workload name, else raise with the closest names.
    Only the form: nothing is imported, so stored results load whatever is installed."""
    if name in WORKLOADS or _prefixed(name) or is_served(name) or _user_target(name):
        return name
    if is_micro(name):
        return name
    close = difflib.get_close_matches(name, WORKLOADS, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise AccelbenchError(
        f"unknown workload {name!r}: {hint}`accelbench list` shows them all; "
        "timm/<model>, hf/<model_type>, served/<model>, micro/<kind> and file.py:function "
        "name others"
    )


def check(name: str, model_args: ModelArgs) -> None:
    """Everything about a workload that can be checked before its cell runs, without running the
    user's code: the timm model or transformers type exists, the user's file or module exists,
    and the factory takes these model args."""
    check_name(name)
    _check_values(model_args)
    if is_served(name):  # its server is asked before the first cell (sweep.plan)
        if model_args:
            raise AccelbenchError(f"{name} is built by its server: leave out --model-arg")
        return
    if is_micro(name):
        takes = MICRO[name.removeprefix("micro/")]
        for key, value in model_args.items():
            if key not in takes or not isinstance(value, takes[key]):
                kinds = ", ".join(f"{k} ({t.__name__})" for k, t in takes.items())
                raise AccelbenchError(f"{name} takes the model args {kinds}: not {key}={value!r}")
        return
    if name in WORKLOADS:
        _check_args(name, WORKLOADS[name], model_args)
    elif name.startswith("timm/"):
        import timm

        model = name.removeprefix("timm/")
        if not timm.is_model(model):
            close = difflib.get_close_matches(model, timm.list_models(), n=3)
            hint = f"did you mean {' or '.join('timm/' + c for c in close)}? " if close else ""
            raise AccelbenchError(
                f"timm has no model {model!r}: {hint}`timm.list_models()` lists them"
            )
    elif name.startswith("hf/"):
        args = dict(model_args)
        seq_len = int(args.pop("seq_len", language.HF_SEQ_LEN))
        language.hf_head(name.removeprefix("hf/"), seq_len, args)
    else:
        target, function = _user_target(name) or ("", "")
        found = True  # unless the source or module says otherwise (a C extension cannot)
        if target.endswith(".py"):
            source: Path | None = _model_file(target)
        elif not _importable(target):
            raise AccelbenchError(
                f"no module {target} on the Python path: install it or give a file.py path"
            )
        else:
            source = None
            origin = importlib.util.find_spec(target).origin  # type: ignore[union-attr]
            if origin in ("frozen", "built-in"):  # the standard library's own: safe to import
                found = hasattr(importlib.import_module(target), function)
            elif origin and origin.endswith(".py"):
                source = Path(origin)
        if source is not None:
            found = _may_define(source, function)
        if not found:
            raise AccelbenchError(f"{target} defines no {function!r}: name its model function")


_COUNT = re.compile(
    r"^(num_|n_)|(_size|_len|_layers?|_heads?|_dim|classes|channels|chans|width|depth)$"
)
"""Model args that are sizes or counts: a whole number of 1 or more."""
_RATE = re.compile(r"(rate|prob|dropout)$")
"""Model args that are probabilities: from 0 up to 1."""


def _check_values(model_args: ModelArgs) -> None:
    for key, value in model_args.items():
        if _COUNT.search(key) and (type(value) is not int or value < 1):
            raise AccelbenchError(f"--model-arg {key}={value!r}: give a whole number of 1 or more")
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if _RATE.search(key) and not (number and 0 <= float(value) < 1):
            raise AccelbenchError(
                f"--model-arg {key}={value!r}: give a probability from 0 to below 1"
            )


def _may_define(source: Path, function: str) -> bool:
    """Whether the module's source can define `function`, read without running it: a top-level
    def, class, assignment or import of that name, or a star import or module __getattr__ that
    might supply it."""
    try:
        tree = ast.parse(source.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return True  # unreadable here: the cell reports what is wrong, with its line
    names: set[str] = set()
    todo = list(tree.body)
    while todo:  # module level, through if / try / with / for blocks, not into defs
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if _dynamic(node):  # globals()[name] = ...
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                return True
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo += getattr(node, field, [])
        elif isinstance(node, ast.ExceptHandler):
            todo += node.body
        elif isinstance(node, ast.Expr | ast.Pass):
            if _dynamic(node):  # exec(...), globals().update(...)
                return True
        else:  # a statement this reading does not follow: cannot tell
            return True
    return function in names or "__getattr__" in names


def _dynamic(node: ast.AST) -> bool:
    """Whether a statement may define module names by name at run time."""
    tricks = {"globals", "vars", "exec", "setattr", "__dict__"}
    return any(
        (isinstance(n, ast.Name) and n.id in tricks)
        or (isinstance(n, ast.Attribute) and n.attr in tricks)
        for n in ast.walk(node)
    )


def get(name: str, model_args: ModelArgs | None = None) -> Workload:
    """Build the workload `name` with its model args."""
    args = dict(model_args or {})
    check_name(name)
    if name in WORKLOADS:
        _check_args(name, WORKLOADS[name], args)
        return WORKLOADS[name](**args)
    if name.startswith("timm/"):
        return vision.timm_model(name.removeprefix("timm/"), **args)  # type: ignore[arg-type]
    if name.startswith("hf/"):
        return language.hf_model(name.removeprefix("hf/"), **args)  # type: ignore[arg-type]
    if is_served(name):  # nothing of it is built here
        raise AccelbenchError(f"{name} runs on its server: measure it with --scenario serve")
    if is_micro(name):
        raise AccelbenchError(f"{name} measures the device, no model: give --scenario micro")
    return _user_workload(name, args)


def is_micro(name: str) -> bool:
    """True for `micro/<kind>`: the device measured by itself (MICRO)."""
    prefix, _, kind = name.partition("/")
    return prefix == "micro" and kind in MICRO


def measured_by(name: str) -> tuple[str, str] | None:
    """The kind of the scenarios that alone measure workloads of this family (scenarios.base's
    ClientScenario, DeviceScenario), and why; None for a model, which any other measures."""
    if is_served(name):
        return "client", "a served/NAME workload is measured through its server"
    if is_micro(name):
        return "device", "a micro/NAME workload measures the device, not a model"
    return None


def is_served(name: str) -> bool:
    """True for `served/<model>`: a model measured through the server that serves it."""
    prefix, _, model = name.partition("/")
    return prefix == "served" and bool(model.strip())


SERVED_AS = {
    "llama2_70b": ("llama-2-70b",),  # meta-llama/Llama-2-70b-chat-hf, MLPerf's model
    "gpt_oss_120b": ("gpt-oss-120b",),  # openai/gpt-oss-120b
}
"""The shipped workload a served model is, by how its name (the part after the last '/')
begins: what a served run's published figures are looked up by (analysis.references)."""


def served_as(name: str) -> str | None:
    """The shipped workload that `served/<model>` serves, where SERVED_AS knows it."""
    if not is_served(name):
        return None
    model = name.rsplit("/", 1)[-1].lower()
    return next((w for w, starts in SERVED_AS.items() if model.startswith(starts)), None)


def _model_file(target: str) -> Path:
    try:
        path = Path(target).resolve()
        found = path.is_file()
    except (OSError, ValueError):  # a name no file can have (too long, a NUL in it)
        found = False
    if not found:
        raise AccelbenchError(f"no model file {target}: give a path to a .py file")
    return path


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def is_user(name: str) -> bool:
    """True for a user's `file.py:function` or `module:function`."""
    return (
        name not in WORKLOADS
        and not _prefixed(name)
        and not is_served(name)
        and not is_micro(name)
        and _user_target(name) is not None
    )


def edited_at(name: str) -> int | None:
    """When a user's model file last changed (ns), so that what was checked of it is checked
    again after an edit; None for registered, timm and hf workloads and for modules."""
    target = _user_target(name) if is_user(name) else None
    if target is None or not target[0].endswith(".py"):
        return None
    try:
        return Path(target[0]).stat().st_mtime_ns
    except OSError:
        return None


def file_digest(name: str) -> str | None:
    """The first 16 hex digits of the SHA-256 of a user's model file, so that a result names the
    code it measured and an edited file is a new cell; None for registered, timm and hf
    workloads, for modules (their package's version names them) and for a file not found."""
    import hashlib

    target = _user_target(name) if is_user(name) else None
    if target is None or not target[0].endswith(".py"):
        return None
    try:
        return hashlib.sha256(Path(target[0]).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def _prefixed(name: str) -> bool:
    prefix, _, rest = name.partition("/")
    return prefix in ("timm", "hf") and bool(rest) and "/" not in rest


def _user_target(name: str) -> tuple[str, str] | None:
    """(file or module, function) for `path/file.py:function` or `package.module:function`."""
    target, sep, function = name.rpartition(":")
    if not sep or not target or not function.isidentifier():
        return None
    if target.endswith(".py") or all(part.isidentifier() for part in target.split(".")):
        return target, function
    return None


def _check_args(name: str, factory: Callable[..., Workload], model_args: ModelArgs) -> None:
    params = inspect.signature(factory).parameters
    unknown = [k for k in model_args if k not in params]
    if unknown:
        raise AccelbenchError(
            f"{name} takes no model arg {unknown[0]!r}; it takes: {', '.join(params) or 'none'}"
        )


def _user_workload(name: str, model_args: dict[str, Any]) -> Workload:
    """Import the user's module and call their function. Errors in their code propagate with
    their traceback, so the cell's result points at their file."""
    workload = user_function(name)(**model_args)
    if not isinstance(workload, Workload):
        raise AccelbenchError(
            f"{name} returned {type(workload).__name__}; it must return an accelbench.Workload "
            "(see examples/my_model.py)"
        )
    return workload


def user_function(name: str) -> Callable[..., Any]:
    """The function a user's `file.py:function` or `module:function` names, their module
    imported (an engine's user models are built by one too)."""
    target, function = _user_target(name) or ("", "")
    if target.endswith(".py"):
        path = _model_file(target)
        sys.path.insert(0, str(path.parent))  # so that it can import the modules beside it
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    build = getattr(module, function, None)
    if not callable(build):
        raise AccelbenchError(f"{target} has no function {function!r}")
    return build
