"""Transcribe the result tables of seed 002 (Graphcore's "Performance Results" page, last updated
4 July 2023) into rows of src/accelbench/references.csv, values exactly as published.

    python scripts/seed_002_references.py ../shared/seeds/002_*.txt >> src/accelbench/references.csv

The page lists each table as one cell per line: a title, the column names, then the cells row
after row (an empty cell is a no-break space); an empty line ends the table. The OGB-LSC table
at the top is left out: its models are not accelbench workloads and its rows mix units.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

SOURCE = "Graphcore, Performance Results, 4 July 2023"
TABLES = {
    "Bow Platform - Training": "train",
    "Bow Platform - Inference": "infer",
    "MLPerf v2.0 Training Performance": "train",
    "IPU-POD Classic - Training": "train",
    "IPU-POD Classic - Time to Result": "train",
    "IPU-POD Classic - Inference": "infer",
}
IPUS = {"Bow-2000": 4, "IPU-M2000": 4, "1x Bow IPU": 1, "GC200 IPU": 1}
"""IPUs in a platform that does not say its count in its name (Bow PodN and IPU-PODN hold N)."""
RULES = [
    # (model, variant: regular expressions matched in full; workload; its native sequence length)
    (r"ResNet-?50 ?v1\.5", r".*", "resnet50", None),
    (r"ResNeXt101", r"", "resnext101_32x4d", None),
    (
        r"EfficientNet-B0",
        r"|lowest latency config|higher throughput config",
        "efficientnet_b0",
        None,
    ),
    (
        r"EfficientNet-B4",
        r"|lowest latency config|higher throughput config",
        "efficientnet_b4",
        None,
    ),
    (r"EfficientDet-D0", r"", "efficientdet_d0", None),
    (r"EfficientDet-D4", r"", "efficientdet_d4", None),
    (r"U[Nn]et \(Medical\)", r"", "unet_medical", None),
    (r"ViT", r"(Vision Transformer( - Pre-Training)?|Pre-Training)", "vit_base_16", None),
    (r"ViT", r"(Vision Transformer - )?Fine-Tuning", "vit_base_16_finetune", None),
    (r"Swin-Tiny \(224\)", r".*Pre-Training", "swin_tiny", None),
    (r"Swin-Base \(224\)", r".*Pre-Training", "swin_base", None),
    (r"Swin-Large \(224\)", r".*Fine-Tuning", "swin_large", None),
    (r"BERT[ -]Large", r"Ph1 Pre-Training \(SL128\)", "bert_large_pretrain_sl128", 128),
    (r"BERT[ -]Large", r"Ph2 Pre-Training \(SL\d+\)", "bert_large_pretrain_sl512", 512),
    (r"BERT[ -]Large", r"Fine-Tuning \(SL384 - SQuAD\)|SL\d+", "bert_large_squad", 384),
    (r"BERT[ -]Base", r"Ph1 Pre-Training \(SL128\)", "bert_base_pretrain_sl128", 128),
    (r"BERT[ -]Base", r"Ph2 Pre-Training \(SL\d+\)", "bert_base_pretrain_sl512", 512),
    (
        r"BERT[ -]Base( - HuggingFace)?",
        r"Fine-Tuning \(SL384 - SQuAD\)|SL\d+",
        "bert_base_squad",
        384,
    ),
    (r"GPT2", r"GPT2-[Ss]mall( \(SL\d+\))?", "gpt2_small", 1024),
    (r"GPT2", r"GPT2-[Mm]edium( \(SL\d+\))?", "gpt2_medium", 1024),
    (r"GPT2", r"GPT2-[Ll]arge( \(SL\d+\))?", "gpt2_large", 1024),
    (r"Conformer-Medium", r".*", "conformer_medium", None),
    (r"MPNN-GIN", r".*", "gin", None),
]
"""Which accelbench workload runs the model of a published row. Rows with techniques accelbench
does not have (sequence packing, Group BERT, an MLPerf recipe's BERT) match no rule."""


def workload_for(model: str, variant: str) -> tuple[str, str]:
    """(workload, model args as JSON) for a published row; ("", "") if none runs its model. A
    sequence length other than the workload's own becomes a seq_len model arg."""
    for model_re, variant_re, workload, native_seq in RULES:
        if re.fullmatch(model_re, model) and re.fullmatch(variant_re, variant):
            sl = re.search(r"SL(\d+)", variant)
            if native_seq and sl and int(sl.group(1)) != native_seq:
                return workload, json.dumps({"seq_len": int(sl.group(1))})
            return workload, ""
    return "", ""


METRICS = {
    "Throughput (items/sec)": ("throughput", "items/s"),
    "Latency (ms)": ("latency", "ms"),
    "Time to Train (mins)": ("time to train", "min"),
    "Time To Result (secs)": ("time to result", "s"),
}
COLUMNS = [
    "source",
    "table",
    "model",
    "workload",
    "platform",
    "num_devices",
    "replicas",
    "instances",
    "micro_batch",
    "framework",
    "precision_published",
    "metric",
    "value",
    "unit",
    "note",
    "variant",
    "sdk",
    "dataset",
    "global_batch",
    "scenario",
    "model_args",
]


def tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, column names, rows) of each table on the page."""
    lines = text.splitlines()
    found = []
    for title_at, title in enumerate(lines):
        if title not in TABLES:
            continue
        start = next(i for i in range(title_at, len(lines)) if lines[i] in ("Model", "Division"))
        end = start
        while _is_column(lines[end]):
            end += 1
        names = lines[start:end]
        stop = lines.index("", end)  # an empty line ends the table
        cells = [c.replace("\xa0", "").strip() for c in lines[end:stop]]
        if len(cells) % len(names):
            raise SystemExit(f"{title}: {len(cells)} cells do not fill rows of {len(names)}")
        rows = [cells[j : j + len(names)] for j in range(0, len(cells), len(names))]
        found.append((title, names, rows))
    return found


def _is_column(line: str) -> bool:
    return line in {
        "Division",
        "Model",
        "Variant",
        "Platform",
        "SDK Version",
        "Framework",
        "Dataset",
        "Batch Size",
        "Precision",
        "MLPerf Quality Target",
        "MLPerf ID",
        *METRICS,
    }


def references(text: str) -> list[dict[str, str]]:
    out = []
    for title, names, rows in tables(text):
        for cells in rows:
            row = dict(zip(names, cells, strict=True))
            platform = row["Platform"]
            pod = re.search(r"(?:Pod|POD)(\d+)$", platform)
            variant = row.get("Variant") or row.get("Division", "")
            note = (
                f"MLPerf ID {row['MLPerf ID']}, quality target {row['MLPerf Quality Target']}"
                if "MLPerf ID" in row
                else ""
            )
            for column, (metric, unit) in METRICS.items():
                if not row.get(column):
                    continue
                batch = row.get("Batch Size", "").replace(",", "")
                workload, model_args = (
                    workload_for(row["Model"], row.get("Variant", ""))
                    if "MLPerf ID" not in row or "ResNet" in row["Model"]
                    else ("", "")
                )
                scenario = TABLES[title]
                out.append(
                    {
                        "source": SOURCE,
                        "table": title,
                        "model": row["Model"],
                        "workload": workload,
                        "model_args": model_args,
                        "platform": f"Graphcore {platform}",
                        "num_devices": str(int(pod.group(1)) if pod else IPUS[platform]),
                        "replicas": "",
                        "instances": "",
                        "micro_batch": batch if scenario == "infer" else "",
                        "framework": row["Framework"],
                        "precision_published": row["Precision"],
                        "metric": metric,
                        "value": row[column].replace(",", ""),
                        "unit": unit,
                        "note": note,
                        "variant": variant,
                        "sdk": row["SDK Version"],
                        "dataset": row.get("Dataset", ""),
                        "global_batch": batch if scenario == "train" else "",
                        "scenario": scenario,
                    }
                )
    return out


if __name__ == "__main__":
    writer = csv.DictWriter(sys.stdout, fieldnames=COLUMNS, lineterminator="\n")
    writer.writerows(references(Path(sys.argv[1]).read_text()))
