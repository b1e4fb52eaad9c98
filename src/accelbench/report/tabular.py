"""The flat CSV schema of `results --format csv` and `report --format csv`: a row of plain
values a result (flat), with the speed-ups over each cell's one-replica result and a column for
every other spec field whose value differs among the results. A stored result keeps its flat
row (flat_text) and its listing what the rest needs (Flat), so a CSV validates no record."""

from __future__ import annotations

import csv
import io
import json
import shlex
import tempfile
from collections.abc import Iterable, Sequence
from typing import NamedTuple, TextIO

import orjson

from accelbench import scenarios, secrets
from accelbench.analysis import scaling, validity
from accelbench.records import contention
from accelbench.records.result import Result
from accelbench.records.spec import knobs
from accelbench.report import inert
from accelbench.report.cells import differing_values
from accelbench.report.listing import changed_text, whole
from accelbench.storage.exchange import text_of
from accelbench.storage.schema import decoded


def flat(result: Result) -> dict[str, object]:
    """One row of plain values: the spec, the platform and the headline metrics."""
    spec, m = result.spec, result.metrics
    row: dict[str, object] = {
        "key": result.key,
        "created_at": result.created_at.isoformat(),
        "workload": spec.workload,
        "model_args": json.dumps(spec.model_args) if spec.model_args else None,
        "data": spec.data,
        "scenario": spec.scenario,
        "platform": result.platform,
        "device_model": result.device_model,
        "device_type": result.env.device_type,
        "hostname": result.env.hostname,
        "replicas": spec.replicas,
        "nodes": spec.nodes,
        "micro_batch": spec.batch_size,
        "grad_accum": spec.grad_accum,
        "global_batch": spec.global_batch,
        "precision": spec.precision,
        "compile": spec.compile,
        "channels_last": spec.channels_last,
        "workers": spec.workers,
        "repeat": spec.repeat,
        "status": result.status,
        "reason": result.reason,
        "wall_s": result.wall_s,
        "overhead_s": result.overhead_s,
        "tags": json.dumps(secrets.masked(result.tags)) if result.tags else None,
        "command": shlex.join(secrets.scrub_argv(result.argv)) if result.argv else None,
    }
    if m is not None:
        w, s, ci = m.window_items_per_s, m.step_ms_steady, result.items_per_s_ci
        headline = result.headline
        row |= {
            "item_unit": m.item_unit,
            "items_per_s": result.items_per_s,
            "headline_unit": headline.unit if headline else None,
            "items_per_s_ci_low": ci[0] if ci else None,
            "items_per_s_ci_high": ci[1] if ci else None,
            "steady_items": m.delivered.num_items,
            "steady_s": m.delivered.time_s,
            "window_items_per_s_median": w.median,
            "window_items_per_s_p25": w.p25,
            "window_items_per_s_p75": w.p75,
            "num_windows": w.n,
            # No CPU figure from a window shorter than CPU times can resolve.
            "others_cpus": m.host.others_cpus
            if m.host and m.host.window_s >= contention.MIN_WINDOW_S
            else None,
            "load_avg_start": m.host.load_avg_start if m.host else None,
            "ci_met": m.ci_met,
            "verdict": validity.verdict_text(result),
            "flops_per_item": m.flops.per_item if m.flops else None,
            "mfu": m.mfu,
            "mfu_peak_source": m.flops.peak_source if m.flops else None,
            "energy_method": m.energy.method if m.energy else None,
            "joules_per_item": m.joules_per_item,
            "avg_power_w": m.energy.avg_power_w if m.energy else None,
            "compute_items_per_s": m.compute_items_per_s,
            "input_wait_frac": m.input_wait_frac,
            "step_ms_median": s.median,
            "step_ms_p90": s.p90,
            "step_ms_p99": s.p99,
            "num_steady_steps": s.n,
            "first_step_ms": m.first_step_ms,
            "first_epoch_s": m.epochs[0].time_s,
            "last_epoch_s": m.epochs[-1].time_s,
            "loss_last": m.epochs[-1].loss_last,
            "diverged_at_step": m.diverged_at_step,
            "peak_mem_allocated_gib": m.peak_mem_allocated_gib,
            "host_peak_rss_gib": m.host_peak_rss_gib,
            "timer": m.timer,
        }
        row |= scenarios.get(spec.scenario).columns(result)
    return row


class Flat(NamedTuple):
    """What a result's CSV row needs of it: its flat row (flat_text), what pairs it with its
    cell's one-replica result, and its spec's fields not at their default (the listing's)."""

    text: str
    scale: scaling.Scale
    spec: str


def flat_text(result: Result) -> str:
    """flat() as JSON, each cell as a spreadsheet shows it as text (inert.csv_cell), without
    any secret: what a stored result keeps (its lister's) and the CSV writes."""
    row = {k: inert.csv_cell(v) for k, v in flat(result).items()}
    try:  # a tenth of json's time: no cell is NaN (csv_cell)
        text = orjson.dumps(row).decode()
    except orjson.JSONEncodeError:  # an integer past 64 bits (a seed, a model arg)
        text = json.dumps(row, separators=(",", ":"))
    return secrets.scrub(text)


def flat_of(result: Result) -> Flat:
    return Flat(flat_text(result), scaling.scale(result), changed_text(result.spec))


def to_csv(results: Sequence[Result]) -> str:
    """write_csv's CSV, as text."""
    return text_of(write_csv, results)


def write_csv(results: Iterable[Result], out: TextIO) -> int:
    """write_flats of these results."""
    return write_flats(map(flat_of, results), out)


def write_flats(flats: Iterable[Flat], out: TextIO) -> int:
    """The flat rows with the speed-ups, and a column for every other spec field whose value
    differs among the results (threads, tensor_parallel, epochs, ...): rows that ran
    differently never read the same. The columns are known only when every result has been
    seen, so each row and spec waits in a temporary file, not in memory. Returns how many."""
    pairing: scaling.Pairing[scaling.Scale] = scaling.Pairing()
    columns: dict[str, None] = {}
    specs: dict[str, None] = {}  # each distinct one: a cell's repeats on every host share it
    count = 0
    with tempfile.TemporaryFile("w+", encoding="utf-8") as spool:
        for count, f in enumerate(flats, 1):
            columns |= dict.fromkeys(decoded(f.text))
            specs[f.spec] = None
            spool.write(f"[{f.text},{f.spec}]\n")
            pairing.add(count, f.scale)
        speedups = pairing.speedups()
        del pairing
        names = [n for n in knobs() if n not in RENAMED]
        shown = differing_values(names, (whole(json.loads(spec)) for spec in specs))
        shown = [k for k in shown if k not in columns]
        fields = [*columns, "speedup", "scaling_efficiency", *shown]
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(fields)
        spool.seek(0)
        for number, line in enumerate(spool, 1):
            row, spec = decoded(line)
            if (pair := speedups.get(number)) is not None:
                row |= {"speedup": pair.speedup, "scaling_efficiency": pair.efficiency}
            if shown:
                spec = whole(spec)
                row |= {k: inert.csv_cell(_cell(spec.get(k))) for k in shown}
            writer.writerow([row.get(k) for k in fields])
    return count


RENAMED = ("batch_size", "device", "platform")
"""Spec fields flat() gives under other names (micro_batch, device_type, platform)."""


def _cell(value: object) -> object:
    return json.dumps(value) if isinstance(value, dict | list) else value


def rows_csv(rows: Sequence[dict[str, object]]) -> str:
    """CSV of plain rows, with every column any row has; no cell can run as a formula in a
    spreadsheet (report.inert.csv_cell)."""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: inert.csv_cell(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()
