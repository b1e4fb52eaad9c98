"""A server's power as a series that something on its host logged (nvidia-smi, DCGM, a PDU's
meter), for the energy per token of a server that runs on another host: read as each serving
trial ends and integrated over the trial's window (the trapezoid rule between the samples, the
series interpolated at the window's edges).

Two forms of CSV are read:

- nvidia-smi's own: `nvidia-smi --query-gpu=index,timestamp,power.draw --format=csv -lms 200`
  (columns `index`, `timestamp` as 2026/11/26 10:00:00.123 in the host's local time, and
  `power.draw [W]` as 71.52 W), a series per GPU index, summed;
- a plain one: columns `time_s` (Unix seconds) and `watts`, and optionally `device`, a series
  per device, summed.

Or a Prometheus server's URL: its range query (by default DCGM's board power, summed) over each
trial (execution.meters.power_series reads either). The logger must run through the trials, and the two hosts' clocks agree (NTP): a series
that does not cover a trial's window gives no energy for it, and says so.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from accelbench import inputs
from accelbench.errors import AccelbenchError

Series = dict[str, list[tuple[float, float]]]
"""Each device's samples: (Unix seconds, watts), in time order."""

NVIDIA_SMI_TIME = "%Y/%m/%d %H:%M:%S.%f"
FIX = "give nvidia-smi's CSV (--query-gpu=index,timestamp,power.draw) or columns time_s,watts"


def read(path: Path) -> Series:
    """The file's series; raises, naming the forms it reads, on one that is neither. A row
    that cannot be read (a log still being written ends with a short one) is skipped, and so
    is a reading of watts that is not a finite number of 0 or more."""
    try:
        with inputs.opened(path, "power series", inputs.TABLE_BYTES) as f:
            header = [name.strip() for name in next(csv.reader(f), [])]
            series: Series = defaultdict(list)
            for row in csv.reader(f):
                if (sample := _sample(dict(zip(header, row, strict=False)))) is not None:
                    series[sample[0]].append(sample[1:])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AccelbenchError(f"power series {path}: {FIX} ({type(exc).__name__})") from None
    if "power.draw [W]" not in header and not {"time_s", "watts"} <= set(header):
        raise AccelbenchError(f"power series {path}: {FIX}")
    if not series:
        raise AccelbenchError(f"power series {path}: no readable samples: {FIX}")
    return {device: sorted(points) for device, points in series.items()}


def _sample(row: dict[str, str]) -> tuple[str, float, float] | None:
    """(device, Unix seconds, watts) of one row of either form; None for a row that is not one
    whole, valid sample."""
    row = {k: v.strip() for k, v in row.items()}
    try:
        if "power.draw [W]" in row:
            when = datetime.strptime(row["timestamp"], NVIDIA_SMI_TIME).timestamp()
            device, watts = row.get("index", "0"), float(row["power.draw [W]"].removesuffix("W"))
        else:
            device, when, watts = row.get("device", "0"), float(row["time_s"]), float(row["watts"])
    except (KeyError, ValueError):
        return None
    return (device, when, watts) if plausible(when, watts) else None


def plausible(when: float, watts: float) -> bool:
    return math.isfinite(when) and math.isfinite(watts) and watts >= 0


def joules(points: list[tuple[float, float]], start: float, end: float) -> float | None:
    """The energy of one series over [start, end] in joules; None where its samples do not
    reach both edges of the window."""
    if not points or points[0][0] > start or points[-1][0] < end:
        return None
    inside = [(t, w) for t, w in points if start < t < end]
    edges = [(start, _at(points, start)), *inside, (end, _at(points, end))]
    return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(edges))


def _at(points: list[tuple[float, float]], t: float) -> float:
    """The series' watts at time t, linear between its samples (t within them)."""
    i = bisect.bisect_left(points, (t, float("-inf")))
    if points[i][0] == t or i == 0:
        return points[i][1]
    (t0, w0), (t1, w1) = points[i - 1], points[i]
    return w0 + (w1 - w0) * (t - t0) / (t1 - t0)
