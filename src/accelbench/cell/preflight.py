"""What a cell's inputs would fail on, found before any cell runs, by trying them once on no data.

For each distinct workload, model args and data of a sweep: the workload is made (a user's file
imported and their function called, a timm or transformers model's arguments taken), its model is
built on the `meta` device, where tensors have shapes but no storage, and a batch of two synthetic
samples goes through its loss there: shape mismatches, impossible configs and a loss that is not
one number show up in about a second and without memory. Then one item of the data set is read.

It runs in a child process (launch.probe_environment or launch.preflight_in_child), so a user's code never
runs in the sweep's process. An operation the meta device cannot run (one that reads a value,
such as `.item()`) leaves that part untried: its cell finds out.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from accelbench import workloads
from accelbench.errors import AccelbenchError, missing_extra, one_line
from accelbench.records.frozen import Frozen
from accelbench.workload import Tokens, Workload


class Inputs(Frozen):
    """What a cell is built from, as the probe's child reads it from a file."""

    workload: str
    model_args: dict[str, int | float | bool | str] = Field(default_factory=dict)
    data: str | None = None
    tensor_parallel: int = 1
    """Devices its layers are split over."""
    sequence_parallel: bool = False
    """Whether along the sequence too."""
    generates: bool = False
    """Whether it must generate text."""
    batch_size: int = 2
    """The smallest batch the sweep asks for (a model may need a multiple of 4)."""


def check(inputs: Sequence[Inputs]) -> None:
    """Raise an AccelbenchError on the first input that cannot work, naming it and why."""
    for item in inputs:
        _check_one(
            item.workload,
            item.model_args,
            item.data,
            item.tensor_parallel,
            item.generates,
            item.sequence_parallel,
            item.batch_size,
        )


def _check_one(
    name: str,
    args: dict[str, Any],
    data_path: str | None,
    tp: int = 1,
    generates: bool = False,
    sequence: bool = False,
    batch_size: int = 2,
) -> None:
    what = name + "".join(f" --model-arg {k}={v}" for k, v in args.items())
    try:
        workload = workloads.get(name, args)
    except AccelbenchError:
        raise
    except Exception as exc:
        raise _fault(what, "cannot be made", exc) from None
    _on_meta(what, workload, tp, generates, sequence, batch_size)
    if data_path is not None:
        from accelbench.execution import data

        data.check_readable(data_path, workload, name)


def _on_meta(
    what: str, workload: Workload, tp: int, generates: bool, sequence: bool, batch_size: int
) -> None:
    """Build the model on the meta device, check that its layers split over `tp` devices (and
    along the sequence, with `sequence`) and that it generates text if it must, and take the
    loss of a batch of `batch_size` there: one synthetic sample made on the host, its batch
    made on the meta device (shapes, no memory)."""
    import torch
    from torch.utils.data import default_collate

    step = "cannot build its model"
    try:
        with torch.device("meta"):
            model = workload.build_model()
        if tp > 1:
            from accelbench.execution import sharding

            plan = sharding.tensor_plan(model, what, tp)
            if sequence:
                sharding.sequence_plan(sharding.base_of(model), plan, what)
        if generates and not (hasattr(model, "generate") and isinstance(workload.reads, Tokens)):
            raise AccelbenchError(
                f"{what} does not generate text: --scenario generate needs a causal language "
                "model (gpt2_*, llama3_*, hf/<causal type>)"
            )
        step = "cannot make a sample"
        gen = torch.Generator().manual_seed(0)
        one = default_collate([workload.make_sample(gen)])
        batch = {
            key: torch.empty((batch_size, *value.shape[1:]), dtype=value.dtype, device="meta")
            for key, value in one.items()
        }
        step = f"fails on a batch of {batch_size}"
        with torch.device("meta"):
            loss = workload.loss(model, batch)
    except AccelbenchError:
        raise
    except Exception as exc:
        if _meta_only(exc):
            return  # the meta device cannot run this: the cell will tell
        raise _fault(what, step, exc) from None
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise AccelbenchError(
            f"{what}: its loss gave {shape} for a batch; a loss must be one number (a scalar "
            "tensor): reduce it, e.g. with .mean()"
        )


def _fault(what: str, step: str, exc: Exception) -> AccelbenchError:
    """The error of a workload whose code raised `exc`, naming where it was raised (or the
    extra that installs a missing module)."""
    if extra := missing_extra(exc):
        return AccelbenchError(f"{what} {extra}")
    return AccelbenchError(f"{what} {step}: {one_line(exc)}{_where(exc)}")


_META = re.compile(r"\bmeta\b|data-dependent|expected mat_a to be bfloat16")
"""How torch words a refusal of the meta device ("cannot be called on meta tensors", "devices,
meta and cpu"), and not a user's message about, say, metadata; and torch._grouped_mm's meta
kernel (a mixture of experts' default in transformers), which asks for bf16 where the CPU's
kernel takes fp32: the device's own kernel tells in the cell."""


def _meta_only(exc: Exception) -> bool:
    """Whether `exc` is the meta device declining an operation, not the model's own fault, or
    running out of memory, which a batch may do on a device and is its cell's to record."""
    import torch

    text = str(exc).lower()
    oom = isinstance(exc, torch.OutOfMemoryError)
    return oom or isinstance(exc, NotImplementedError) or bool(_META.search(text))


def _where(exc: Exception) -> str:
    """(file:line) of the innermost frame of the user's own code that `exc` passed through, if
    any: not accelbench's, the standard library's or an installed package's."""
    ours = Path(workloads.__file__).parent.parent
    own = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if Path(frame.filename).is_file()
        and "-packages" not in frame.filename
        and ours not in Path(frame.filename).parents
        and Path(traceback.__file__).parent not in Path(frame.filename).parents
    ]
    return f" ({Path(own[-1].filename).name}:{own[-1].lineno})" if own else ""
