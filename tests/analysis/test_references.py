from __future__ import annotations

import csv
import importlib.util
import io
import sqlite3
from collections import Counter
from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from accelbench import workloads
from accelbench.analysis import references
from accelbench.cell.runner import run
from accelbench.cli import app
from accelbench.records.environment import DeviceInfo
from accelbench.records.precision import Precision
from accelbench.records.result import Result
from accelbench.report import compare as compare_text
from accelbench.report.database import ResultStore

from ..conftest import tiny, with_rate

SEEDS = Path(__file__).parents[3] / "shared" / "seeds"
SEED_003, SEED_002 = sorted(SEEDS.glob("003_*")), sorted(SEEDS.glob("002_*"))
SCRIPTS = Path(__file__).parents[2] / "scripts"


def test_every_row_of_the_papers_tables_is_shipped() -> None:
    # Table 1: 6 runs x 2 epochs; Table 2: 5 models; Table 3: 12 runs x (throughput, time);
    # Table 4: 10 runs x (epoch time, throughput).
    counts = Counter(r.table for r in references.load() if "PEARC" in r.source)
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
    names = {r.workload for r in references.load()} - {None}
    assert {"autoencoder", "resnet50", "bert_large_squad", "gpt2_small", "lstm"} <= names
    assert names <= set(workloads.WORKLOADS) | {f"micro/{kind}" for kind in workloads.MICRO}
    assert {"micro/matmul", "micro/triad"} <= names  # the device's own anchors


def test_cli_lists_and_filters_references() -> None:
    result = CliRunner().invoke(
        app, ["references", "--workload", "autoencoder", "--platform", "ipu", "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert len(rows) == 10 and all("Mk2 IPU" in r["platform"] for r in rows)
    bad = CliRunner().invoke(app, ["references", "--workload", "resnet"])
    assert bad.exit_code == 2 and "unknown workload 'resnet'" in bad.output


def test_every_row_of_the_vendor_tables_is_shipped() -> None:
    # Seed 002: each table's rows, one reference per published figure (inference rows give
    # throughput and, where published, latency); seed 001: its headline ratios.
    counts = Counter(
        (r.table, r.metric) for r in references.load() if "Performance Results" in r.source
    )
    assert counts == {
        ("Bow Platform - Training", "throughput"): 64,
        ("Bow Platform - Inference", "throughput"): 37,
        ("Bow Platform - Inference", "latency"): 35,
        ("MLPerf v2.0 Training Performance", "time to train"): 11,
        ("IPU-POD Classic - Training", "throughput"): 62,
        ("IPU-POD Classic - Time to Result", "time to result"): 1,
        ("IPU-POD Classic - Inference", "throughput"): 71,
        ("IPU-POD Classic - Inference", "latency"): 69,
    }
    claims = [r for r in references.load() if r.table == "claims"]
    assert len(claims) == 15 and all(r.unit == "x" and "IPU-M2000" in r.source for r in claims)


@pytest.mark.parametrize(
    ("model", "variant", "platform", "batch", "metric", "value"),
    [
        ("BERT Large", "Ph1 Pre-Training (SL128)", "Bow Pod16", 65280, "throughput", 4527),
        ("GPT2", "GPT2-Small", "Bow Pod16", 4, "throughput", 1361),
        ("GPT2", "GPT2-Small", "Bow Pod16", 4, "latency", 5.51),
        ("BERT-Large", "SL128", "IPU-M2000", 4, "latency", 1.92),
        ("ResNet50 v1.5", "Closed", "Bow Pod16", None, "time to train", 19.64),
    ],
)
def test_vendor_spot_values_as_published(
    model: str, variant: str, platform: str, batch: int | None, metric: str, value: float
) -> None:
    found = {
        r.value
        for r in references.load()
        if (r.model, r.variant, r.platform, r.metric)
        == (model, variant, f"Graphcore {platform}", metric)
        and batch in (r.micro_batch, r.global_batch)
    }
    assert value in found


@pytest.mark.skipif(not SEED_002, reason="the seed documents are not beside this checkout")
def test_seed_002_rows_are_its_transcription() -> None:
    spec = importlib.util.spec_from_file_location("seed_002", SCRIPTS / "seed_002_references.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    transcribed = [
        references.Reference.model_validate({k: v or None for k, v in row.items()})
        for row in script.references(SEED_002[0].read_text())
    ]
    assert [r for r in references.load() if "Performance Results" in r.source] == transcribed


def test_published_precisions_map_to_accelbench_ones() -> None:
    assert set(references.PUBLISHED_PRECISIONS.values()) <= set(get_args(Precision))
    bert = references.query(workload="bert_base_squad", platform="IPU-M2000")
    assert bert and all(r.precision == "fp16" and r.model_args == {"seq_len": 128} for r in bert)


def test_table_4_comparison_from_the_references_alone() -> None:
    lines = compare_text.head_to_head(references.query(workload="autoencoder", table="Table 4"))
    assert lines == [
        "Table 4, autoencoder, 2 device(s), micro batch 10: Mk2 IPU 5,185 (micro batch 10) vs "
        "A100 274 (micro batch 10) images/s: Mk2 IPU 18.92x faster (derived)",
        "Table 4, autoencoder, 2 device(s), each at its best: A100 8,642 (micro batch 512) vs "
        "Mk2 IPU 5,185 (micro batch 10) images/s: A100 1.67x faster (derived)",
        "Table 4, autoencoder, 1 device(s), micro batch 10: Mk2 IPU 2,954 (micro batch 10) vs "
        "A100 270 (micro batch 10) images/s: Mk2 IPU 10.94x faster (derived)",
    ]


@pytest.fixture(scope="module")
def measured() -> Result:
    return run(tiny(workload="tiny_mlp"))


def on_platform(result: Result, device: str, items_per_s: float, **spec: object) -> Result:
    """A real result, moved to another platform and cell, with its throughput set."""
    assert result.metrics is not None
    env = result.env.model_copy(
        update={"device_type": "cuda", "devices": [DeviceInfo(name=device)]}
    )
    metrics = with_rate(result, items_per_s).metrics
    fields = {"workload": "autoencoder", "batch_size": 512, "replicas": 2} | spec
    new_spec = result.spec.model_copy(update=fields)
    return result.model_copy(
        update={"env": env, "spec": new_spec, "metrics": metrics, "key": str(items_per_s)}
    )


def test_runs_are_matched_to_the_closest_published_figure(measured: Result) -> None:
    a100 = "NVIDIA A100-SXM4-80GB"
    close = references.match(on_platform(measured, a100, 8300.0))
    assert close is not None and close.reference.value == 8642  # Table 4: 2 A100s at 512
    assert close.ratio == pytest.approx(8300 / 8642)
    assert close.verdict(10) == ("agrees", [])
    low = references.match(on_platform(measured, a100, 5000.0))
    assert low is not None
    verdict, causes = low.verdict(10)
    assert verdict == "below-reference"
    assert "the published precision is not given" in causes
    # Four A100s at batch 256: nothing at that count, so the nearest, per device.
    scaled = references.match(on_platform(measured, a100, 12000.0, replicas=4, batch_size=256))
    assert scaled is not None and scaled.per_device and scaled.reference.micro_batch == 256
    assert scaled.measured == 3000 and scaled.published == 5983 / 2
    assert "4 device(s) against 2 published: compared per device" in scaled.differences
    assert references.match(on_platform(measured, "NVIDIA H100 80GB HBM3", 9000.0)) is None
    assert references.match(measured) is None  # a CPU: nothing published


def test_compare_reference_through_the_cli(measured: Result, tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    with ResultStore(db) as store:
        store.put(on_platform(measured, "NVIDIA A100-SXM4-80GB", 5000.0))
        store.put(measured)
    result = CliRunner().invoke(app, ["compare", "--reference", "--db", str(db)])
    # Outside the tolerance: an acceptance test fails, with a line saying so.
    assert result.exit_code == 1, result.output
    assert "error: 1 of 1 run(s) outside ±10% of their published figure" in result.output
    assert "0.58" in result.output and "below-reference" in result.output  # 5,000 / 8,642
    assert "autoencoder bs=512 x2 replicas fp32: below-reference:" in result.output
    assert "tiny_mlp on" in result.output and "no published throughput" in result.output
    wide = ["compare", "--reference", "--tolerance", "50", "--db", str(db)]
    assert CliRunner().invoke(app, wide).exit_code == 0  # 0.58 is within 50%
    bad = CliRunner().invoke(app, ["compare", "--db", str(db)])
    assert bad.exit_code == 2 and "or --reference to compare with published results" in bad.output


def test_a_pipeline_counts_every_stage_as_a_device(measured: Result, tmp_path: Path) -> None:
    # Two A100s as two pipeline stages of one replica: two devices, matched to Table 4's two.
    piped = on_platform(
        measured, "NVIDIA A100-SXM4-80GB", 8300.0, replicas=1, pipeline_stages=2, grad_accum=2
    )
    assert piped.num_devices == 2
    close = references.match(piped)
    assert close is not None and close.reference.num_devices == 2 and not close.per_device
    db = tmp_path / "p.sqlite"
    with ResultStore(db) as store:
        store.put(piped)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT num_devices FROM results").fetchall() == [(2,)]


@pytest.mark.parametrize(
    ("platform", "variant", "tokens_per_s"),
    [  # MLPerf Inference v4.1 closed, llama2-70b-99: each log summary's tokens per second
        ("H100-SXM-80GB", "Server", 23132.81),
        ("H100-SXM-80GB", "Offline", 24528.3),
        ("H200-SXM-141GB", "Server", 29228.22),
        ("H200-SXM-141GB", "Offline", 31302.7),
    ],
)
def test_mlperf_serving_anchors_carry_their_log_files(
    platform: str, variant: str, tokens_per_s: float
) -> None:
    (ref,) = [
        r
        for r in references.query(platform=platform)
        if (r.scenario, r.variant) == ("serve", variant)
    ]
    assert ref.value == tokens_per_s and ref.unit == "tokens/s" and ref.num_devices == 8
    assert f"llama2-70b-99/{variant}/performance/run_1/mlperf_log_summary.txt" in ref.source


@pytest.mark.parametrize(
    ("workload", "platform", "variant", "devices", "tokens_per_s"),
    [  # MLPerf Inference v6.1 summary.csv, closed division: each row's Result
        ("llama2_70b", "DGX B300", "Offline", 8, 109277.0),
        ("llama2_70b", "MI355X", "Interactive", 8, 73191.5),
        ("gpt_oss_120b", "CoreWeave B200", "Server", 8, 90204.7),
        ("gpt_oss_120b", "MI300X", "Offline", 8, 30198.4),
        ("gpt_oss_120b", "VibeHPC", "Offline", 1, 14130.6),
    ],
)
def test_mlperf_v6_1_serving_rows_as_published(
    workload: str, platform: str, variant: str, devices: int, tokens_per_s: float
) -> None:
    (ref,) = [
        r
        for r in references.query(workload=workload, platform=platform, table="v6.1")
        if r.variant == variant
    ]
    assert (ref.value, ref.num_devices, ref.unit, ref.scenario) == (
        tokens_per_s,
        devices,
        "tokens/s",
        "serve",
    )
    assert "inference_results_v6.1, summary.csv" in ref.source and f"/{variant}/" in (
        ref.note or ""
    )


def test_a_served_model_is_the_shipped_workload_it_names() -> None:
    assert workloads.served_as("served/meta-llama/Llama-2-70b-chat-hf") == "llama2_70b"
    assert workloads.served_as("served/openai/gpt-oss-120b") == "gpt_oss_120b"
    assert workloads.served_as("served/RedHatAI/gpt-oss-120b-FP8-dynamic") == "gpt_oss_120b"
    assert workloads.served_as("served/Qwen/Qwen3-8B") is None
    assert workloads.served_as("llama2_70b") is None  # not served


def served(
    base: Result, model: str, platform: str, tokens_per_s: float, devices: int | None
) -> Result:
    """`base` as a serve run of `model` on a server named `platform` whose closed loop
    answered `tokens_per_s` output tokens a second on `devices` GPUs."""
    from accelbench.scenarios.serve import ServedRequest, ServeMetrics
    from accelbench.scenarios.serve.measure import trial

    assert base.metrics is not None
    spec = base.spec.model_copy(
        update={
            "workload": f"served/{model}",
            "scenario": "serve",
            "endpoint": "http://gpu-node:8000",
            "platform": platform,
            "batch_size": 64,
        }
    )
    answered = ServedRequest(sent_s=0.0, prompt_tokens=10, output_tokens=100, chunk_ms=[5, 9])
    loop = trial(spec, [answered] * round(tokens_per_s / 100), None, 64, duration_s=1.0)
    record = ServeMetrics(
        server_model=model,
        slo_share=0.99,
        trials=[loop],
        reported=None,
        search="s",
        server_devices=devices,
    )
    metrics = base.metrics.model_copy(update={"record": record})
    return base.model_copy(update={"spec": spec, "metrics": metrics})


def test_a_serve_run_is_set_beside_mlperfs_offline_row_of_its_model(measured: Result) -> None:
    llama = "meta-llama/Llama-2-70b-chat-hf"
    h200 = references.match(served(measured, llama, "NVIDIA H200 node", 28000.0, 8))
    assert h200 is not None and h200.reference.variant == "Offline"
    assert h200.reference.value == 31302.7 and not h200.per_device  # v4.1, 8 H200s
    assert h200.ratio == pytest.approx(28000 / 31302.7)
    assert any("engine are its server's" in d for d in h200.differences)
    assert "the published precision is not given" not in h200.differences
    half = references.match(served(measured, llama, "NVIDIA H200 node", 14000.0, 4))
    assert half is not None and half.per_device and half.measured == 3500.0
    assert "4 device(s) against 8 published: compared per device" in half.differences
    b200 = references.match(served(measured, "openai/gpt-oss-120b", "NVIDIA B200", 85000.0, 8))
    assert b200 is not None and b200.reference.value == 91487.4  # CoreWeave's 8 B200s
    # No match without the server's GPU count (a server elsewhere), a family, or a known model.
    assert references.match(served(measured, llama, "NVIDIA H200", 28000.0, None)) is None
    assert references.match(served(measured, llama, "server at gpu-node", 1.0, 8)) is None
    assert references.match(served(measured, "Qwen/Qwen3-8B", "NVIDIA H200", 1.0, 8)) is None
    assert references.family("NVIDIA GB200") is None  # a Grace superchip is not a B200


def test_mlperf_training_scores_as_published() -> None:
    rows = references.query(workload="llama2_70b", table="Training v5.1")
    scores = {r.platform.split(" (")[0]: (r.value, r.unit, r.num_devices) for r in rows}
    assert scores == {
        "NVIDIA H200-SXM5-141GB": (23.4737585017, "min", 8),
        "AMD Instinct MI325X 256GB HBM3E": (21.6307171586, "min", 8),
    }
    v6 = {
        (r.workload, r.source.split(", ")[1]): (r.value, r.global_batch)
        for r in references.query(table="Training v6.0")
    }
    assert v6[
        (
            "gpt_oss_20b",
            "GigaComputing/summary.json (as copied at github.com/Richardyu114/training_results_v6.0",
        )
    ] == (85.1308083469, 24)
    assert v6[
        (
            "llama3_1_8b",
            "Inventec/summary.json (as copied at github.com/Richardyu114/training_results_v6.0",
        )
    ] == (77.3280666667, 16)
    assert len(v6) == 6
    every = [*rows, *references.query(table="Training v6.0")]
    assert all(r.metric not in references.THROUGHPUT_METRICS for r in every)  # listed only
