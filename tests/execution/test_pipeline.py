from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from accelbench import workloads
from accelbench.cli import app
from accelbench.errors import AccelbenchError
from accelbench.execution.pipeline import WithLoss, split_points

EXAMPLE = Path(__file__).parents[2] / "examples" / "my_model.py"


def mse(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])


def test_stages_begin_where_the_forward_flops_divide_evenly() -> None:
    # Forward FLOPs per layer: 2*4*(8*8), 2*4*(8*64), 2*4*(64*8), 2*4*(8*8): half are in layer 1.
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 8), torch.nn.Linear(8, 64), torch.nn.Linear(64, 8), torch.nn.Linear(8, 8)
    )
    whole = WithLoss(model, mse, ["x", "y"])
    example = (torch.randn(4, 8), torch.randn(4, 8))
    assert split_points(whole, example, 2) == ["model.2"]
    with pytest.raises(AccelbenchError, match="no chain of 6 blocks to split into 3 stages"):
        split_points(whole, example, 3)


def test_a_resnet_splits_between_its_stages() -> None:
    workload = workloads.get("timm/resnet18", {"image_size": 32})
    sample = workload.make_sample(torch.Generator().manual_seed(0))
    whole = WithLoss(workload.build_model(), workload.loss, list(sample))
    example = tuple(v.unsqueeze(0).repeat(2, *[1] * v.dim()) for v in sample.values())
    (point,) = split_points(whole, example, 2)
    assert point in {"model.layer2", "model.layer3"}


def test_two_stage_pipeline_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    result = CliRunner().invoke(
        app,
        [
            "run",
            f"{EXAMPLE}:build",
            "--model-arg",
            "width=8",
            "--batch-size",
            "4",
            "--grad-accum",
            "2",
            "--pipeline-stages",
            "1,2",
            "--epochs",
            "2",
            "--steps-per-epoch",
            "3",
            "--window-steps",
            "1",
            "--device",
            "cpu",
            "--db",
            str(db),
        ],
    )
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        records = [json.loads(r) for (r,) in conn.execute("SELECT record FROM results")]
    by_stages = {r["spec"]["pipeline_stages"]: r for r in records}
    assert {k: r["status"] for k, r in by_stages.items()} == {1: "ok", 2: "ok"}
    piped = by_stages[2]["metrics"]
    assert [r["rank"] for r in piped["ranks"]] == [0, 1]
    assert all(isinstance(x, float) and x == x for x in piped["loss"])  # the last stage's, no NaN
    assert piped["flops"]["num_devices"] == 2
    # The same model and data: the pipeline's first step computes the same loss.
    assert piped["loss"][0] == pytest.approx(by_stages[1]["metrics"]["loss"][0], rel=1e-4)
    assert "in 2 stages fp32" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--replicas", "2", "--pipeline-stages", "2"], "pipeline stages run one replica so far"),
        (
            ["--pipeline-stages", "2", "--pipeline-schedule", "1f1b"],
            "1F1B needs at least one micro-batch per stage: give --grad-accum 2",
        ),
    ],
)
def test_pipeline_settings_that_cannot_run(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["run", "tiny_mlp", "--device", "cpu", *args])
    assert result.exit_code == 2 and message in result.output
