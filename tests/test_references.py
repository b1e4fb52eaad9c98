from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import references
from accelbench.cli import app

SEED_003 = sorted((Path(__file__).parents[2] / "shared" / "seeds").glob("003_*"))


def test_every_row_of_the_papers_tables_is_shipped() -> None:
    # Table 1: 6 runs x 2 epochs; Table 2: 5 models; Table 3: 12 runs x (throughput, time);
    # Table 4: 10 runs x (epoch time, throughput).
    counts = Counter(r.table for r in references.load())
    assert counts == {"Table 1": 12, "Table 2": 5, "Table 3": 24, "Table 4": 20}


@pytest.mark.parametrize(
    ("table", "platform", "devices", "metric", "value"),
    [
        ("Table 4", "Mk2 IPU", 16, "throughput", 21547),  # seed 003, Table 4, last row
        ("Table 4", "A100", 1, "epoch 2 time", 259.0),
        ("Table 1", "IPU-POD16", 16, "throughput, epoch 2", 18532.6),  # 16 instances
        ("Table 3", "IPU-POD16", 64, "training time", 11.8),
    ],
)
def test_spot_values_as_published(
    table: str, platform: str, devices: int, metric: str, value: float
) -> None:
    found = [
        r.value
        for r in references.query(platform=platform)
        if (r.table, r.num_devices, r.metric) == (table, devices, metric)
    ]
    assert value in found


@pytest.mark.skipif(not SEED_003, reason="the seed documents are not beside this checkout")
def test_table_4_matches_the_seed_text() -> None:
    lines = SEED_003[0].read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Hardware Platform"))
    published = [line.split("\t") for line in lines[start + 1 : start + 11]]
    shipped = [r for r in references.load() if r.table == "Table 4" and r.metric == "throughput"]
    assert [(int(p[1]), int(p[2]), float(p[4].replace(",", ""))) for p in published] == [
        (r.num_devices, r.micro_batch, r.value) for r in shipped
    ]


def test_references_name_real_workloads() -> None:
    assert {r.workload for r in references.load()} == {
        "resnet50", "efficientnet_b0", "efficientnet_b4", "mobilenetv3_small",
        "mobilenetv3_large", "bert_base_squad", "autoencoder",
    }  # fmt: skip


def test_cli_lists_and_filters_references() -> None:
    result = CliRunner().invoke(
        app, ["references", "--workload", "autoencoder", "--platform", "ipu", "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert len(rows) == 10 and all("Mk2 IPU" in r["platform"] for r in rows)
    bad = CliRunner().invoke(app, ["references", "--workload", "resnet"])
    assert bad.exit_code == 2 and "unknown workload 'resnet'" in bad.output
