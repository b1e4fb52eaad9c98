"""The command that advises from stored results: recommend."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from accelbench import scenarios
from accelbench.cli.app import (
    AnswerFormat,
    AnswerOption,
    DbsOption,
    app,
    check_filters,
    console,
    percent,
    print_answer,
    reads,
)
from accelbench.cli.results import TokensOption
from accelbench.errors import AccelbenchError
from accelbench.report.advice import (
    advice_lines,
    constraints_text,
    published_lines,
    recommendation,
)
from accelbench.storage.several import stream_all


@app.command()
@reads
def recommend(
    workload: Annotated[str, typer.Argument(help="The workload to advise on.")],
    objective: Annotated[
        str,
        typer.Option(
            help="throughput, time-to-train, latency (with --latency-bound-ms), energy "
            "(J per item), cost (with --prices) or goodput (serve: requests/s within the SLO)."
        ),
    ] = "throughput",
    scenario: Annotated[
        str | None,
        typer.Option(help="train or infer, for throughput, energy and cost (default: train)."),
    ] = None,
    latency_bound_ms: Annotated[
        float | None, typer.Option(help="Latency: the p99 each batch must keep within, ms.", min=0)
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            help='Cost: a TOML file, [prices] then "A100" = 2.5 ($ per device-hour, by '
            "a part of the platform name)."
        ),
    ] = None,
    global_batch: Annotated[
        int | None, typer.Option(help="Only configurations with this global batch.", min=1)
    ] = None,
    max_devices: Annotated[
        int | None, typer.Option(help="At most this many devices.", min=1)
    ] = None,
    memory_headroom: Annotated[
        str | None, typer.Option(help="Keep this share of device memory free, e.g. 10%.")
    ] = None,
    tokens: TokensOption = None,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference", help="Also list what published results give on other platforms."
        ),
    ] = False,
    fmt: AnswerOption = AnswerFormat.table,
    db: DbsOption = None,
) -> None:
    """Which platform, batch size, device count and precision for an objective, from the stored
    runs: per platform the best configuration, its effective batch range, the runs behind it,
    how sure that is and what was not measured."""
    from accelbench.analysis import advice, objectives

    if scenario is not None and objective in ("time-to-train", "latency", "goodput"):
        raise AccelbenchError(
            f"--scenario goes with throughput, energy or cost; {objective} sets its own"
        )
    rated = [s.name for s in scenarios.all_scenarios() if s.rated_by_steps]
    if scenario is not None and scenario not in rated:
        raise AccelbenchError(f"--scenario {scenario!r}: give one of {', '.join(rated)}")
    constraints = objectives.Constraints(
        global_batch=global_batch,
        max_devices=max_devices,
        memory_headroom_pct=percent(memory_headroom, "--memory-headroom"),
        latency_bound_ms=latency_bound_ms,
        prices=objectives.load_prices(prices) if prices else {},
        tokens=tokens,
    )
    check_filters(workload, None, None)
    each = stream_all(db, workload=workload)  # a result at a time: a site's are not held
    answers = advice.recommend(each, workload, objective, constraints, scenario)
    goal = objectives.goal_of(objective, constraints)
    refs = advice.published(workload, [a.platform for a in answers]) if reference else None
    if fmt is AnswerFormat.json:
        read_from = [scenario] if scenario else list(goal.scenarios)
        print_answer(
            recommendation(workload, objective, goal.unit, read_from, constraints, answers, refs)
        )
        return
    read = scenario or " and ".join(goal.scenarios)
    console.print(
        f"{workload}, objective {objective} ({goal.unit}), {read} results"
        + (
            f"; constraints: {constraints_text(constraints)}"
            if constraints_text(constraints)
            else ""
        )
    )
    if not answers:
        console.print(
            f"no stored {read} results of {workload}: measure some with "
            f"`accelbench tune {workload}` or `accelbench run`"
        )
    for line in advice_lines(answers, objective, constraints):
        console.print(line)
    if refs is not None:
        for line in published_lines(refs) or ["no published throughput for this workload"]:
            console.print(line)
