"""A ReFrame test library: an accelbench cell as a ReFrame run-only test, its headline and
verdict as ReFrame performance variables that ReFrame sets against references and logs with the
rest of a centre's checks.

`AccelbenchCell` runs `accelbench run WORKLOAD OPTIONS` into a database of the test's own, then
reads the result's flat CSV row (`accelbench results --format csv`). Its sanity: the cell was
measured (status ok). Its performance variables:

- `throughput`: the headline rate (items/s: images, samples, tokens as the workload counts them);
- `valid`: 1 when accelbench's verdict is `valid`, 0 when the result is flagged (contended,
  noisy, too-short, ...), so that a reference of (1, 0, 0) fails a flagged run;
- `interval_pct`: the half-width of the headline's 95% interval, in percent.

A check is a subclass that sets the workload, its options and references:

    import reframe as rfm
    from accelbench.integrations.reframe_check import AccelbenchCell

    @rfm.simple_test
    class ResNet50(AccelbenchCell):
        valid_systems = ["cluster:gpu"]
        workload = "resnet50"
        options = ["--batch-size", "256", "--precision", "amp-fp16", "--device", "cuda"]
        reference = {"cluster:gpu": {"throughput": (2470, -0.05, None, "items/s"),
                                     "valid": (1, 0, 0, "")}}

Run it as any check: `reframe -c resnet50_check.py -r`.
"""

from __future__ import annotations

import csv
import shlex
from typing import Any

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import performance_function, run_before, sanity_function, variable

ROW = "accelbench-result.csv"
"""The cell's result as `accelbench results --format csv` writes it, in the stage folder."""


class AccelbenchCell(rfm.RunOnlyRegressionTest):
    """One accelbench cell; subclass it with @rfm.simple_test (see the module's docstring)."""

    valid_systems = ["*"]  # noqa: RUF012 (ReFrame sets its variables in the class body)
    valid_prog_environs = ["*"]  # noqa: RUF012
    keep_files = [ROW]  # noqa: RUF012 (kept in ReFrame's output folder with the job's output)
    workload = variable(str)
    """The accelbench workload (`accelbench list`)."""
    options = variable(typ.List[str], value=[])
    """Further `accelbench run` options: batch size, precision, device, epochs, ..."""
    accelbench = variable(str, value="accelbench")
    """The command that runs accelbench (e.g. `python -m accelbench` in a virtual environment)."""

    @run_before("run")
    def set_command(self) -> None:
        db = "accelbench.sqlite"
        command = shlex.split(self.accelbench)
        self.executable = command[0]
        self.executable_opts = [*command[1:], "run", self.workload, *self.options, "--db", db]
        self.postrun_cmds = [f"{self.accelbench} results --format csv --db {db} > {ROW}"]

    @sanity_function
    def measured(self) -> Any:
        return sn.assert_eq(_status(self), "ok")

    @performance_function("items/s")
    def throughput(self) -> Any:
        return _rate(self)

    @performance_function("")
    def valid(self) -> Any:
        return _valid(self)

    @performance_function("%")
    def interval_pct(self) -> Any:
        return _interval_pct(self)


def _row(test: AccelbenchCell) -> dict[str, str]:
    """The cell's row, as accelbench wrote it."""
    with open(f"{test.stagedir}/{ROW}", newline="") as f:
        (row,) = csv.DictReader(f)
    return dict(row)


@sn.deferrable
def _status(test: AccelbenchCell) -> str:
    return _row(test)["status"]


@sn.deferrable
def _rate(test: AccelbenchCell) -> float:
    return float(_row(test)["items_per_s"])


@sn.deferrable
def _valid(test: AccelbenchCell) -> int:
    return int(_row(test)["verdict"] == "valid")


@sn.deferrable
def _interval_pct(test: AccelbenchCell) -> float:
    """The 95% interval's half-width over the rate; NaN where there is none."""
    row = _row(test)
    rate, low, high = row["items_per_s"], row["items_per_s_ci_low"], row["items_per_s_ci_high"]
    if not (rate and low and high):
        return float("nan")
    return 100 * (float(high) - float(low)) / 2 / float(rate)
