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
import math
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from accelbench import wire
from accelbench.errors import AccelbenchError
from accelbench.records.energy import EnergyMetrics
from accelbench.secrets import redact_url

Series = dict[str, list[tuple[float, float]]]
"""Each device's samples: (Unix seconds, watts), in time order."""

NVIDIA_SMI_TIME = "%Y/%m/%d %H:%M:%S.%f"
FIX = "give nvidia-smi's CSV (--query-gpu=index,timestamp,power.draw) or columns time_s,watts"


def read(path: Path) -> Series:
    """The file's series; raises, naming the forms it reads, on one that is neither. A row
    that cannot be read (a log still being written ends with a short one) is skipped, and so
    is a reading of watts that is not a finite number of 0 or more."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
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
    return (device, when, watts) if _plausible(when, watts) else None


def _plausible(when: float, watts: float) -> bool:
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
        """The window's energy; a series that cannot be read now (a scrape that fails, a file
        being rotated) gives none, with the reason, and never fails the trial."""
        end = time.time()
        try:
            series = self.fetch(self._start, end)
        except AccelbenchError as exc:
            return EnergyMetrics(method="not available", scope=f"{self.name}: {exc}")
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
    try:
        parts = urlsplit(source)
        parts.port  # noqa: B018  (raises for a port that is not a number)
    except ValueError as exc:
        raise AccelbenchError(
            f"--power-series {redact_url(source)} is not a URL ({exc}): give http://HOST:PORT"
        ) from None
    base = urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
    query = parse_qs(parts.query).get("query", [DCGM_POWER])[0]
    shown = redact_url(f"{parts.scheme}://{parts.netloc}")
    return SeriesMeter(f"Prometheus {shown} {query}", functools.partial(query_range, base, query))


SCRAPE_DEADLINE_S = 30.0
"""The longest a range query may take, answer and all: a trial's end waits no longer for it."""
SCRAPE_CAP_BYTES = 16 << 20
"""The largest answer read: a day's range at 1,000 steps for 64 GPUs is a few MB."""


def query_range(base: str, query: str, start: float, end: float) -> Series:
    """A Prometheus server's range query (its `query`, else DCGM_POWER) over the window,
    evaluated every step: a series per label set. Prometheus evaluates each step at the newest
    sample scraped before it, so the series is as fine as its scrape interval. A point that is
    not a finite number of watts of 0 or more is dropped."""
    import httpx

    step = max(0.5, (end - start) / 1000)
    params: dict[str, str | float] = {"query": query, "start": start, "end": end + step}
    fix = f"Prometheus at {redact_url(base)}: give the server's URL (and a query giving watts)"
    try:
        body = wire.get(
            f"{base}/api/v1/query_range",
            params | {"step": step},
            SCRAPE_DEADLINE_S,
            SCRAPE_CAP_BYTES,
        )
        series = {
            json.dumps(r["metric"], sort_keys=True): [
                (t, w)
                for t, w in ((float(t), float(v)) for t, v in r["values"])
                if _plausible(t, w)
            ]
            for r in json.loads(body)["data"]["result"]
        }
    except wire.Garbage as exc:
        raise AccelbenchError(f"{fix} ({exc})") from None
    except (httpx.HTTPError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise AccelbenchError(f"{fix} ({type(exc).__name__})") from None
    series = {labels: points for labels, points in series.items() if points}
    if not series:
        raise AccelbenchError(f"{fix}: {query} gave no series")
    return series


def check(source: str) -> None:
    """Raise, naming the fix, where the series cannot be read: before any cell runs."""
    now = time.time()
    meter(source).fetch(now - 60, now)
