"""The JUBE example (examples/jube/accelbench.yaml), run by JUBE itself where it is installed
(the Debian package: .ci/run installs it): its result table is what accelbench's database holds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.analysis import validity
from accelbench.report.database import ResultStore

BENCHMARK = Path(__file__).parents[2] / "examples" / "jube" / "accelbench.yaml"


def test_jube_sweeps_cells_and_tabulates_them_from_the_database(tmp_path: Path) -> None:
    jube = shutil.which("jube")
    if jube is None:
        pytest.skip("JUBE is not installed (Debian: apt-get install jube)")
    env = os.environ | {"ACCELBENCH_CMD": f"{sys.executable} -m accelbench"}
    run = tmp_path / "run"
    for args in (["run", str(BENCHMARK), "--outpath", str(run)], ["result", "-a", str(run)]):
        done = subprocess.run([jube, *args], capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in done.stdout.splitlines()
        if re.match(r"^\|\s+lenet5", line)
    ]
    assert [row[1] for row in rows] == ["16", "64", "256"]
    (db,) = run.glob("*/accelbench.sqlite")
    assert f"--db jube_run/{db.parent.name}/accelbench.sqlite" in BENCHMARK.read_text()  # header
    with ResultStore(db, writable=False) as store:
        stored = {r.spec.batch_size: r for r in store.query()}
    for _, batch, throughput, unit, verdict, status in rows:
        r = stored[int(batch)]
        assert (status, unit) == (r.status, r.headline.unit if r.headline else "")
        assert float(throughput) == pytest.approx(r.items_per_s)
        assert verdict.replace("+", ", ") == validity.verdict_text(r)
