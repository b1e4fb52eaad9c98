from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from accelbench import workloads
from accelbench.scenarios import train

from .conftest import tiny


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_every_workload_trains_one_step(name: str) -> None:
    metrics = train.measure(
        tiny(workload=name, batch_size=2, epochs=1, steps_per_epoch=1),
        workloads.get(name),
        torch.device("cpu"),
    )
    assert len(metrics.step_ms) == 1
    assert metrics.step_ms[0] > 0
    assert metrics.diverged_at_step is None
    assert metrics.items_per_step == 2
    assert workloads.describe(name)


def test_autoencoder_has_the_published_parameter_count() -> None:
    model = workloads.get("autoencoder").build_model()
    count = sum(p.numel() for p in model.parameters())
    assert abs(count - 8_922_155) / 8_922_155 < 1e-3  # seed 000: "Total params: 8,922,155"
    image = torch.rand(3, 1, 28, 28)
    assert model(image).shape == image.shape


def test_resnet50_is_the_imagenet_shape() -> None:
    w = workloads.get("resnet50")
    sample = w.make_sample(torch.Generator().manual_seed(0))
    assert sample["image"].shape == (3, 224, 224)
    model = w.build_model()
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(25.6e6, rel=0.01)


def test_bert_sample_has_sequence_length_384() -> None:
    sample = workloads.get("bert_base_squad").make_sample(torch.Generator().manual_seed(0))
    assert sample["input_ids"].shape == (384,)


def test_unknown_workload_suggests_a_name() -> None:
    with pytest.raises(Exception, match="did you mean autoencoder"):
        workloads.get("autoencodr")


def test_listing_does_not_import_torch() -> None:
    code = "import sys, accelbench.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
