"""The generate scenario: fixed work, every token timed, TTFT and TPOT from the raw times."""

from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from accelbench import workloads
from accelbench.cli import app
from accelbench.records.energy import EnergyMetrics
from accelbench.report.database import ResultStore
from accelbench.report.results import notes
from accelbench.scenarios.base import record_of
from accelbench.scenarios.generate import GenerateMetrics
from accelbench.scenarios.generate import measure as generate
from accelbench.scenarios.generate.report import lines as generate_lines

from ..conftest import tiny

runner = CliRunner()


@pytest.mark.parametrize(
    ("name", "model_args"), [("llama3_tiny", {}), ("gpt2_small", {"seq_len": 64})]
)
def test_ttft_and_tpot_are_those_of_the_raw_token_times(
    name: str, model_args: dict[str, int]
) -> None:
    spec = tiny(
        workload=name,
        scenario="generate",
        model_args=model_args,
        batch_size=2,
        prompt_tokens=8,
        new_tokens=5,
        epochs=2,
        steps_per_epoch=3,
    )
    m = generate.measure(spec, workloads.get(name, model_args), torch.device("cpu"))
    g = m.of(GenerateMetrics)
    assert g is not None and len(g.token_ms) == 6
    assert all(len(t) == 5 and t == sorted(t) for t in g.token_ms)  # 5 tokens, in order
    steady = g.token_ms[m.steady_from_step :]  # epoch 1 is warm-up, or more where it was slow
    assert g.ttft_ms.median == pytest.approx(statistics.median(t[0] for t in steady))
    tpot = [(t[-1] - t[0]) / 4 for t in steady]
    assert g.tpot_ms.median == pytest.approx(statistics.median(tpot))
    gaps = [b - a for t in steady for a, b in itertools.pairwise(t)]
    assert g.itl_ms.n == 4 * len(steady) and g.itl_ms.median == pytest.approx(
        statistics.median(gaps)
    )
    # Each call ends after its last token reached the host.
    assert all(t[-1] <= step for t, step in zip(g.token_ms, m.step_ms, strict=True))
    assert m.tokens_per_item == 5 and m.items_per_step == 2
    # The loss is the model's on its prompts (random weights: about ln(vocabulary)), not a filler.
    vocab = workloads.get(name, model_args).reads.vocab_size  # type: ignore[union-attr]
    assert len(set(m.loss)) == 1 and 0.5 * math.log(vocab) < m.loss[0] < 2 * math.log(vocab)
    assert m.tokens_per_s == pytest.approx(m.items_per_s * 5)


def test_a_generate_sweep_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    args = ["run", "llama3_tiny", "--scenario", "generate", "--batch-size", "2"]
    args += ["--prompt-tokens", "8", "--new-tokens", "4,6", "--epochs", "2"]
    out = runner.invoke(app, [*args, "--steps-per-epoch", "3", "--device", "cpu", "--db", str(db)])
    assert out.exit_code == 0, out.output
    with ResultStore(db) as store:
        found = store.query()
    assert sorted(r.spec.knob("new_tokens") for r in found) == [4, 6]
    assert all(r.status == "ok" and r.metrics and r.metrics.of(GenerateMetrics) for r in found)
    lines = [line for line in notes(found) if "TTFT p50" in line]
    assert len(lines) == 2 and all("output tokens/s" in line for line in lines)
    # Where energy was metered (not on this VM), the line gives it per output token.
    r = next(r for r in found if r.spec.knob("new_tokens") == 4)
    assert r.metrics and "J per output token" not in generate_lines(r)[0]
    energy = EnergyMetrics(method="rapl", scope="CPU packages", joules=10.0)
    metered = r.model_copy(
        update={"metrics": r.metrics.model_copy(update={"energy": energy, "joules_per_item": 2.0})}
    )
    assert "; 0.5 J per output token (rapl)" in generate_lines(metered)[0]


def test_a_model_that_cannot_generate_is_refused_before_any_cell(tmp_path: Path) -> None:
    db = tmp_path / "r.sqlite"
    out = runner.invoke(
        app, ["run", "resnet50", "--scenario", "generate", "--device", "cpu", "--db", str(db)]
    )
    assert out.exit_code == 2 and "does not generate text" in out.output, out.output
    assert not db.exists()


def test_one_new_token_has_no_time_per_output_token() -> None:
    with pytest.raises(ValueError, match="new_tokens"):
        tiny(workload="llama3_tiny", scenario="generate", new_tokens=1)


def test_the_report_draws_tokens_per_user_against_tokens_per_device() -> None:
    from accelbench.cell.runner import run
    from accelbench.report import figures
    from accelbench.scenarios.generate import report

    quick = {"prompt_tokens": 8, "new_tokens": 4, "epochs": 2, "steps_per_epoch": 3}
    results = [
        run(tiny(workload="llama3_tiny", scenario="generate", batch_size=b, **quick))
        for b in (1, 4)
    ]
    (plot,) = [p for p in figures.plots(results) if p.name.startswith("generation")]
    assert plot.name == "generation-llama3-tiny"
    assert [p.name for p in report.figure(results)] == [plot.name]
    trade, first = plot.figure.axes
    line = trade.get_lines()[0]
    per_user = [1e3 / g.tpot_ms.median for r in results if (g := record_of(r, GenerateMetrics))]
    per_device = [r.metrics.tokens_per_s for r in results if r.metrics]
    xs, ys = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    assert xs.tolist() == pytest.approx(per_device)
    assert ys.tolist() == pytest.approx(per_user)
    assert np.asarray(first.get_lines()[0].get_xdata()).tolist() == [1, 4]
