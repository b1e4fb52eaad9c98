"""A workload that cannot work is refused before any cell starts, in one line, with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench import workloads
from accelbench.cell import preflight
from accelbench.errors import AccelbenchError

from ..cli.test_cli import QUICK, invoke

HEADER = "import torch\nfrom accelbench import Workload\n"
BROKEN = {
    "syntax": ("def build(:\n", r"cannot be made: SyntaxError: .*line 3"),
    "raises": (
        "def build():\n    return 1 / 0\n",
        r"cannot be made: ZeroDivisionError: .*\(m\.py:4\)",
    ),
    "returns": (
        "def build():\n    return 42\n",
        r"returned int; it must return an accelbench\.Workload",
    ),
    "model": (
        "def build():\n    return Workload('items', lambda: torch.nn.Linear(-1, 2), "
        "lambda g: {'x': torch.randn(4)}, lambda m, b: m(b['x']).sum())\n",
        r"cannot build its model: RuntimeError: Trying to create tensor with negative dimension",
    ),
    "shapes": (
        "def build():\n    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(5)}, lambda m, b: m(b['x']).sum())\n",
        r"fails on a batch of 2: RuntimeError: .*\[2, 5\] X \[4, 2\].*\(m\.py:4\)",
    ),
    "vector loss": (
        "def build():\n    return Workload('items', lambda: torch.nn.Linear(4, 2), "
        "lambda g: {'x': torch.randn(4)}, lambda m, b: m(b['x']))\n",
        r"its loss gave \(2, 2\) for a batch; a loss must be one number",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_user_model_is_named_with_its_fault(tmp_path: Path, case: str) -> None:
    source, message = BROKEN[case]
    (tmp_path / "m.py").write_text(HEADER + source)
    with pytest.raises(AccelbenchError, match=message):
        preflight.check([preflight.Inputs(workload=f"{tmp_path / 'm.py'}:build")])


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("timm/resnet18", {"imagesize": 64}, "unexpected keyword argument 'imagesize'"),
        ("hf/bert", {"hidden_size": 100, "num_attention_heads": 3}, r"not a multiple of"),
    ],
)
def test_impossible_model_args_are_named(name: str, args: dict[str, int], message: str) -> None:
    with pytest.raises(AccelbenchError, match=message):
        preflight.check([preflight.Inputs(workload=name, model_args=args)])


def test_every_registered_workload_passes() -> None:
    """No false refusal: each seed workload is made, built and (where meta allows) run."""
    preflight.check([preflight.Inputs(workload=name) for name in workloads.WORKLOADS])


def test_a_bad_model_exits_2_before_any_cell(tmp_path: Path) -> None:
    model, db = tmp_path / "broken.py", tmp_path / "results.sqlite"
    model.write_text("def build():\n    return undefined_name\n")
    code, output = invoke("run", f"{model}:build", "--batch-size", "2,4", *QUICK, "--db", str(db))
    assert code == 2
    assert output == (
        f"error: {model}:build cannot be made: NameError: name 'undefined_name' is not defined "
        "(broken.py:2)\n"
    )
    assert not db.exists()  # no cell ran, nothing was opened


def test_a_model_that_ends_the_process_is_refused_in_one_line(tmp_path: Path) -> None:
    model, db = tmp_path / "quits.py", tmp_path / "results.sqlite"
    model.write_text("import os\n\ndef build():\n    os._exit(0)\n")
    code, output = invoke("run", f"{model}:build", *QUICK, "--db", str(db))
    assert code == 2 and not db.exists()
    assert output == (
        "error: inspecting device 'cpu' and the inputs ended with exit code 0 and no answer: "
        "does a model's code end its process?\n"
    )


def test_only_the_meta_device_s_own_refusals_are_let_through() -> None:
    from accelbench.cell.preflight import _meta_only

    assert _meta_only(RuntimeError("Tensor.item() cannot be called on meta tensors"))
    assert _meta_only(RuntimeError("found at least two devices, meta and cpu!"))
    assert not _meta_only(ValueError("no metadata in /data/set.csv"))  # the user's own fault


FOURS = (
    "def build():\n    def loss(m, b):\n"
    "        assert b['x'].shape[0] % 4 == 0, 'batches of a multiple of 4'\n"
    "        return m(b['x']).sum()\n"
    "    return Workload('items', lambda: torch.nn.Linear(4, 2), "
    "lambda g: {'x': torch.randn(4)}, loss)\n"
)


def test_the_pre_flight_tries_the_smallest_batch_asked_for(tmp_path: Path) -> None:
    # A valid model that takes batches of a multiple of 4 only: refused at any batch when the
    # pre-flight tried a fixed batch of 2.
    model, db = tmp_path / "fours.py", tmp_path / "results.sqlite"
    model.write_text(HEADER + FOURS)
    # First a batch it refuses (this process then holds the model as tried, as a search would).
    code, output = invoke("run", f"{model}:build", "--batch-size", "6", *QUICK, "--db", str(db))
    assert (
        code == 2 and "fails on a batch of 6: AssertionError: batches of a multiple of 4" in output
    )
    code, output = invoke("run", f"{model}:build", "--batch-size", "8,4", *QUICK, "--db", str(db))
    assert code == 0, output


@pytest.mark.parametrize(
    ("name", "module", "extra"),
    [
        ("timm/resnet18", "timm", "vision"),
        ("hf/bert", "transformers", "nlp"),
        ("gin", "torch_geometric", "graph"),
    ],
)
def test_a_missing_extra_is_named(
    name: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, module, None)  # as if not installed: importing it fails
    with pytest.raises(
        AccelbenchError, match=rf"needs {module}: pip install 'accelbench\[{extra}\]'"
    ):
        preflight.check([preflight.Inputs(workload=name)])
