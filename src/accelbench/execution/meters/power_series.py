"""A logged power series read over a window (SeriesMeter): from a file, or a Prometheus server's
range query (by default DCGM's board power, summed), scraped within a deadline and a size cap.
What the series are and how they integrate is in records.power_series.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from accelbench import wire
from accelbench.errors import AccelbenchError
from accelbench.records.energy import EnergyMetrics
from accelbench.records.power_series import Series, joules, plausible, read
from accelbench.secrets import redact_url

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
                (t, w) for t, w in ((float(t), float(v)) for t, v in r["values"]) if plausible(t, w)
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
