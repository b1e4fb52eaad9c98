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
trial. The logger must run through the trials, and the two hosts' clocks agree (NTP): a series
that does not cover a trial's window gives no energy for it, and says so.
"""

from __future__ import annotations

import bisect
import csv
import functools
import itertools
import json
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from accelbench.errors import AccelbenchError
from accelbench.records.energy import EnergyMetrics

Series = dict[str, list[tuple[float, float]]]
"""Each device's samples: (Unix seconds, watts), in time order."""

NVIDIA_SMI_TIME = "%Y/%m/%d %H:%M:%S.%f"
FIX = "give nvidia-smi's CSV (--query-gpu=index,timestamp,power.draw) or columns time_s,watts"


def read(path: Path) -> Series:
    """The file's series; raises, naming the forms it reads, on one that is neither."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = [{k.strip(): v.strip() for k, v in r.items() if k} for r in csv.DictReader(f)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise AccelbenchError(f"power series {path}: {FIX} ({type(exc).__name__})") from None
    series: Series = defaultdict(list)
    try:
        for row in rows:
            if "power.draw [W]" in row:
                when = datetime.strptime(row["timestamp"], NVIDIA_SMI_TIME).timestamp()
                watts = float(row["power.draw [W]"].removesuffix("W"))
                series[row.get("index", "0")].append((when, watts))
            else:
                series[row.get("device", "0")].append((float(row["time_s"]), float(row["watts"])))
    except (KeyError, ValueError):
        raise AccelbenchError(f"power series {path}: {FIX}") from None
    if not series:
        raise AccelbenchError(f"power series {path}: no samples: {FIX}")
    return {device: sorted(points) for device, points in series.items()}


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


Fetch = Callable[[float, float], Series]
"""The series over a window (start, end in Unix seconds)."""


class SeriesMeter:
    """The energy a logged power series holds over each window (start, then stop), as
    CounterMeter gives a counter's; the series from `fetch` (meter(): a file or a Prometheus
    server), named `name`."""

    def __init__(self, name: str, fetch: Fetch) -> None:
        self.name, self.fetch = name, fetch
        self._start = 0.0

    def start(self) -> None:
        self._start = time.time()

    def stop(self) -> EnergyMetrics:
        end = time.time()
        series = self.fetch(self._start, end)
        found = [joules(points, self._start, end) for points in series.values()]
        scope = f"{self.name}: {len(series)} device(s) as logged on the server's host"
        if None in found:
            return EnergyMetrics(
                method="not available",
                scope=f"{scope}; its samples do not cover the trial (keep the logger running)",
            )
        total = sum(j for j in found if j is not None)
        return EnergyMetrics(
            method="power series",
            scope=scope,
            joules=total,
            avg_power_w=total / (end - self._start) if end > self._start else None,
            num_samples=sum(
                sum(1 for t, _ in points if self._start <= t <= end) for points in series.values()
            ),
        )


DCGM_POWER = "sum(DCGM_FI_DEV_POWER_USAGE)"
"""The GPUs' board power in watts as NVIDIA's DCGM exporter names it, summed."""


def meter(source: str) -> SeriesMeter:
    """The meter of a --power-series: a Prometheus server's URL (its range query, query_range),
    else a file (read as each window ends)."""
    if not source.startswith(("http://", "https://")):
        path = Path(source)
        return SeriesMeter(path.name, lambda start, end: read(path))
    parts = urlsplit(source)
    base = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
    query = parse_qs(parts.query).get("query", [DCGM_POWER])[0]
    return SeriesMeter(
        f"Prometheus {parts.netloc} {query}", functools.partial(query_range, base, query)
    )


def query_range(base: str, query: str, start: float, end: float) -> Series:
    """A Prometheus server's range query (its `query`, else DCGM_POWER) over the window,
    evaluated every step: a series per label set. Prometheus evaluates each step at the newest
    sample scraped before it, so the series is as fine as its scrape interval."""
    import httpx

    step = max(0.5, (end - start) / 1000)
    params: dict[str, str | float] = {"query": query, "start": start, "end": end + step}
    fix = f"Prometheus at {base}: give the server's URL (and a query giving watts)"
    try:
        answer = httpx.get(f"{base}/api/v1/query_range", params=params | {"step": step}, timeout=30)
        found = answer.json()["data"]["result"]
        series = {
            json.dumps(r["metric"], sort_keys=True): [(float(t), float(v)) for t, v in r["values"]]
            for r in found
        }
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise AccelbenchError(f"{fix} ({type(exc).__name__})") from None
    if not series:
        raise AccelbenchError(f"{fix}: {query} gave no series")
    return series


def check(source: str) -> None:
    """Raise, naming the fix, where the series cannot be read: before any cell runs."""
    now = time.time()
    meter(source).fetch(now - 60, now)
