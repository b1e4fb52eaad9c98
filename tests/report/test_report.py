from __future__ import annotations

import functools
import io
import json
import math
from typing import Any

import pytest
from rich.console import Console

from accelbench.cell.runner import run
from accelbench.records.result import Result, cell_hash
from accelbench.records.stats import summarize
from accelbench.report import cells, listing, tables, tabular
from accelbench.report import results as results_text
from accelbench.scenarios.server import ServerMetrics, ServerTrial

from ..conftest import tiny, with_rate


def render(results: list[Result]) -> str:
    console = Console(file=io.StringIO(), width=400)  # no cell wraps, whatever the CPU's name
    console.print(tables.rich(results_text.results_grid(results)))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_invalid_throughput_is_never_shown_as_a_plain_number() -> None:
    ok, diverged = run(tiny()), run(tiny(lr=1e9, steps_per_epoch=5))
    assert ok.metrics and diverged.metrics
    text = render([ok, diverged])
    assert cells.rate_text(ok.metrics.items_per_s) in text
    unit = diverged.metrics.item_unit
    assert f"({cells.rate_text(diverged.metrics.items_per_s)} {unit}/s)" in text
    lines = results_text.notes([ok, diverged])
    # Each line names the knobs the two runs differ in.
    knobs = "steps_per_epoch=5 lr=1000000000.0"
    assert any(
        f"bs={diverged.spec.batch_size} fp32 {knobs}: diverged: loss became" in line
        for line in lines
    )
    assert lines[-1] == results_text.NOT_VALID_NOTE


def test_a_lopsided_interval_shows_both_sides() -> None:
    result = with_rate(run(tiny()), 1000.0, spread=0.02)
    assert cells.ci_text(result) == "±2.0"
    assert result.metrics is not None
    delivered = result.metrics.delivered.model_copy(update={"ci_low": 970.0, "ci_high": 1060.0})
    lopsided = result.model_copy(
        update={"metrics": result.metrics.model_copy(update={"delivered": delivered})}
    )
    assert cells.ci_text(lopsided) == "+6.0/-3.0"


def test_rate_text_keeps_three_digits_for_slow_rates() -> None:
    assert cells.rate_text(24.44) == "24.4"
    assert cells.rate_text(5833.2) == "5,833"


def test_flat_row_holds_spec_and_headline_metrics() -> None:
    result = run(tiny(grad_accum=2))
    row = tabular.flat(result)
    assert (row["micro_batch"], row["grad_accum"], row["global_batch"]) == (4, 2, 8)
    assert row["items_per_s"] == result.items_per_s
    assert row["num_steady_steps"] == 8 - result.metrics.steady_from_step  # type: ignore[union-attr]
    header = tabular.to_csv([result]).splitlines()[0].split(",")
    assert header[:3] == ["key", "created_at", "workload"]


def test_a_one_replica_eager_cells_keys_are_those_the_long_way_makes() -> None:
    # Its own base and its own eager cell: the listing takes them from its other keys.
    result = run(tiny())
    row = listing.of(result)
    assert row.base == cell_hash(result, ignore=("grad_accum",), replicas=1, nodes=1)
    assert row.eager == cell_hash(result, compile=False)
    assert (row.base, row.eager) == (row.alone, row.cell)


def test_a_result_whose_model_arg_is_past_64_bits_is_listed() -> None:
    # orjson refuses such an integer: the listing's keys and texts are then json's.
    result = run(tiny())

    def listed(width: int) -> listing.Listing:
        spec = result.spec.model_copy(update={"model_args": {"width": width}})
        return listing.of(result.model_copy(update={"spec": spec}))

    big, bigger = listed(10**30), listed(10**30 + 1)
    assert '"width":1000000000000000000000000000000}' in big.spec
    assert big.cell != bigger.cell and big.fleet_cell != bigger.fleet_cell


def test_a_listing_with_a_nan_or_a_number_past_64_bits_reads_back_as_made() -> None:
    """orjson writes a listing, but would write a NaN as null and refuses an integer past 64
    bits: json writes those, and each reads back as it was made (orjson would read such an
    integer as a float)."""
    made = listing.of(run(tiny()))
    assert "NaN" not in made.dumps()
    for odd in (made._replace(items_per_s=float("nan")), made._replace(interval=(1.0, math.inf))):
        read = listing.Listing.loads(odd.dumps())
        assert read is not None and json.dumps(read) == json.dumps(odd)  # NaN equals itself
    for width in (2**70, 2**70 + 1, -(2**70)):  # orjson would read each as the same float
        read = listing.Listing.loads(made._replace(knobs={"model_args": {"width": width}}).dumps())
        assert read is not None and read.knobs == {"model_args": {"width": width}}
    assert listing.Listing.loads(made.dumps()) == made


def test_listings_read_back_share_their_knobs_only_where_equal_in_type_too() -> None:
    row = listing.of(run(tiny()))
    texts = [row._replace(knobs={"seed": v}).dumps() for v in (1, True, 1.0, 1)]
    read = [listing.Listing.loads(text) for text in texts]
    assert [type(r.knobs["seed"]) for r in read if r] == [int, bool, float, int]
    assert read[0] and read[3] and read[0].knobs is read[3].knobs  # held once


def test_a_listing_reads_back_as_made_and_one_whose_fields_are_odd_reads_as_it_is() -> None:
    made = listing.of(run(tiny()))
    read, again = (listing.Listing.loads(made.dumps()) for _ in range(2))
    assert read == made and again == made
    assert read and again and again.roles is read.roles and again.words is read.words
    names = listing.Listing._fields
    for field, odd, back in (  # a database another program wrote into, at this VERSION
        ("cells", 7, 7),
        ("roles", [["batch", [["a"]], "MEDIAN", 1, ""]], (("batch", (("a",),), "MEDIAN", 1, ""),)),
    ):
        fields = json.loads(made.dumps())
        fields[names.index(field)] = odd
        found = listing.Listing.loads(json.dumps(fields))
        assert found is not None and getattr(found, field) == back


def test_compile_payoff_in_steps() -> None:
    eager = run(tiny(steps_per_epoch=12))
    assert eager.metrics is not None
    fast_steps = eager.metrics.step_ms_steady.model_copy(
        update={"median": eager.metrics.step_ms_steady.median - 0.5}
    )
    compiled = eager.model_copy(
        update={
            "spec": eager.spec.model_copy(update={"compile": True}),
            "metrics": eager.metrics.model_copy(
                update={
                    "first_step_ms": eager.metrics.first_step_ms + 1000.0,
                    "step_ms_steady": fast_steps,
                }
            ),
        }
    )
    ((_, found),) = results_text.listed([eager, compiled])[0].payoffs()
    assert found.cost_ms == pytest.approx(1000.0) and found.saved_ms == pytest.approx(0.5)
    assert found.break_even_steps == pytest.approx(2000)
    line = next(n for n in results_text.notes([eager, compiled]) if "torch.compile" in n)
    assert (
        "costs 1.0 s more in the first step and saves 0.50 ms per step: it pays off after 2,000 steps"
        in line
    )
    slower = compiled.model_copy(
        update={"metrics": eager.metrics.model_copy(update={"first_step_ms": 5.0})}
    )
    ((_, payoff),) = results_text.listed([eager, slower])[0].payoffs()
    assert payoff.break_even_steps is None
    assert results_text.compile_payoff(payoff, "x").endswith("it never pays off here")


def test_mfu_above_a_hundred_percent_is_called_meaningless() -> None:
    result = run(tiny())
    assert result.metrics is not None and result.metrics.flops is not None
    low_peak = result.metrics.flops.model_copy(
        update={"peak_per_s": 1.0, "peak_source": "measured: x"}
    )
    inflated = result.model_copy(
        update={"metrics": result.metrics.model_copy(update={"flops": low_peak})}
    )
    assert not any("above 100%" in line for line in results_text.notes([result]))
    (line,) = [line for line in results_text.notes([inflated]) if "above 100%" in line]
    assert "the peak (measured: x) is below what the model reached" in line


def _replicated(base: Result, replicas: int, threads: int, factor: float) -> Result:
    """`base` as if run over `replicas` replicas of `threads` torch threads each, `factor` as fast."""
    assert base.metrics is not None
    env = base.env.model_copy(update={"torch_num_threads": threads})
    spec = base.spec.model_copy(update={"replicas": replicas})
    return with_rate(base, base.metrics.items_per_s * factor).model_copy(
        update={"env": env, "spec": spec}
    )


def test_scaling_efficiency_only_like_with_like() -> None:
    single = run(tiny(steps_per_epoch=8))
    assert single.metrics is not None
    one = _replicated(single, 1, 2, 1.0)
    # torchrun gave each of two replicas one thread, the single run two: 3.14x means nothing
    unlike = _replicated(single, 2, 1, 3.14)
    (found,) = results_text.listed([one, unlike])[0].pairs
    assert found.speedup is None and found.efficiency is None
    (note,) = results_text.scaling_notes([one, unlike])
    assert (
        "no scaling efficiency: each replica ran 1 torch thread(s), the one-replica run 2" in note
    )
    assert "--threads 1" in note
    like = _replicated(single, 2, 2, 1.8)
    (found,) = results_text.listed([one, like])[0].pairs
    assert (found.speedup, found.efficiency) == (pytest.approx(1.8), pytest.approx(0.9))
    assert results_text.scaling_notes([one, like]) == []
    above = _replicated(single, 2, 2, 2.2)
    (note,) = results_text.scaling_notes([one, above])
    assert "scaling efficiency 110% is above 100%: likely" in note


def test_every_row_says_its_scenario_and_a_server_its_sustained_rate() -> None:
    trained = run(tiny(steps_per_epoch=8))
    assert trained.metrics is not None
    latency = summarize([5.0] * 200)
    kept = ServerTrial(
        target_per_s=50.0,
        achieved_per_s=48.0,
        latency_ms=[5.0] * 200,
        latency=latency,
        mean_batch=1.5,
    )
    missed = kept.model_copy(update={"latency": summarize([50.0] * 200)})

    def server(trials: list[ServerTrial], reported: int | None) -> Result:
        assert trained.metrics is not None
        found = ServerMetrics(latency_bound_ms=10.0, trials=trials, reported=reported, search="s")
        spec = trained.spec.model_copy(update={"scenario": "server", "latency_bound_ms": 10.0})
        metrics = trained.metrics.model_copy(update={"record": found})
        return trained.model_copy(update={"spec": spec, "metrics": metrics})

    sustained, too_slow = server([kept, missed], 0), server([missed], None)
    assert sustained.items_per_s == 48.0 and too_slow.items_per_s is None
    grid = results_text.results_grid([trained, sustained, too_slow])
    assert grid.headers[1] == "Scenario"
    column = grid.headers.index("Throughput")
    assert [row[1] for row in grid.rows] == ["train", "server", "server"]
    capacity = cells.rate_text(trained.metrics.items_per_s)
    # The headline in its own unit, never the capacity.
    assert grid.rows[1][column] == "48 queries/s sustained" and grid.rows[2][column] == ""
    assert capacity not in (grid.rows[1][column], grid.rows[2][column])
    assert "too-slow" in grid.rows[2][-1]


def test_rows_that_differ_in_a_knob_say_so_in_the_table_and_the_csv() -> None:
    import csv

    base = run(tiny())
    tp = base.model_copy(update={"spec": base.spec.model_copy(update={"threads": 1})})
    sharded = base.model_copy(
        update={"spec": base.spec.model_copy(update={"tensor_parallel": 2, "replicas": 2})}
    )
    grid = results_text.results_grid([base, tp, sharded])
    settings = [row[grid.headers.index("Precision, settings")] for row in grid.rows]
    assert settings[0].endswith("threads=default") and settings[1].endswith("threads=1")
    assert "tp=2" in settings[2]  # a tensor-parallel row never reads as a single-device one
    rows = list(csv.DictReader(io.StringIO(tabular.to_csv([base, tp, sharded]))))
    assert [r["threads"] for r in rows] == ["", "1", ""]
    assert [r["tensor_parallel"] for r in rows] == ["1", "1", "2"]
    alone = tabular.to_csv([base]).splitlines()[0].split(",")
    assert "threads" not in alone  # a knob that does not differ adds no column
    failed = tp.model_copy(update={"status": "error", "reason": "boom", "metrics": None})
    lines = results_text.notes([base, failed])
    assert any(line.startswith("tiny_mlp bs=4 fp32 threads=1: error: boom") for line in lines)


def test_a_listing_groups_its_results_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table and its notes share one analysis: repeats grouped and speed-ups paired once
    for the whole listing, not per row (a scan per row was quadratic at site scale)."""
    single = run(tiny(steps_per_epoch=8))
    results = [
        _replicated(single, replicas, 1, 1.0 + replicas / 10).model_copy(
            update={"spec": single.spec.model_copy(update={"replicas": replicas, "repeat": k})}
        )
        for replicas in (1, 2)
        for k in range(20)
    ]
    calls = {"groups": 0, "pairs": 0}
    for name in calls:
        original = getattr(results_text.Rows, name).func

        def counted(self: results_text.Rows, original: Any = original, name: str = name) -> Any:
            calls[name] += 1
            return original(self)

        wrapped = functools.cached_property(counted)
        wrapped.__set_name__(results_text.Rows, name)
        monkeypatch.setattr(results_text.Rows, name, wrapped)
    rows, records = results_text.listed(results)
    grid = results_text.grid(rows)
    lines = results_text.row_notes(rows, records)
    assert calls == {"groups": 1, "pairs": 1}
    assert len(grid.rows) == 40 and any("20 repeats" in line for line in lines)
    assert len(rows.pairs) == 20  # each two-replica repeat against its one-replica base
