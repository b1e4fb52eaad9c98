"""Every script in benchmarks/ runs in its quick mode and prints its ratio, so none can rot."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_benchmark_quick_mode_prints_its_ratio(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"ratio [\w/ ]+: \d+\.\d{3}", last), last
