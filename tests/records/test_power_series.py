"""A logged power series: read in nvidia-smi's form and a plain one, integrated over a window."""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from accelbench.errors import AccelbenchError
from accelbench.execution.meters import power_series as meters_series
from accelbench.records import power_series


def test_energy_is_the_area_under_the_series_within_the_window() -> None:
    ramp = [(0.0, 0.0), (10.0, 100.0)]  # 0 to 100 W over 10 s
    assert power_series.joules(ramp, 0.0, 10.0) == pytest.approx(500.0)
    assert power_series.joules(ramp, 5.0, 10.0) == pytest.approx((50 + 100) / 2 * 5)
    steps = [(0.0, 100.0), (1.0, 200.0), (2.0, 100.0), (3.0, 100.0)]
    assert power_series.joules(steps, 0.5, 2.5) == pytest.approx(
        (150 + 200) / 2 * 0.5 + (200 + 100) / 2 * 1 + 100 * 0.5
    )
    assert power_series.joules(ramp, -1.0, 5.0) is None  # the logger started after the window
    assert power_series.joules(ramp, 5.0, 11.0) is None


def test_nvidia_smis_csv_and_a_plain_one_are_read(tmp_path: Path) -> None:
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "index, timestamp, power.draw [W]\n"
        "0, 2026/11/26 10:00:00.000, 70.00 W\n"
        "1, 2026/11/26 10:00:00.000, 80.50 W\n"
        "0, 2026/11/26 10:00:00.200, 72.00 W\n"
    )
    found = power_series.read(smi)
    assert sorted(found) == ["0", "1"]
    assert [w for _, w in found["0"]] == [70.0, 72.0] and found["1"][0][1] == 80.5
    assert found["0"][1][0] - found["0"][0][0] == pytest.approx(0.2)
    plain = tmp_path / "plain.csv"
    plain.write_text("time_s,watts\n2,20\n1,10\n")
    assert power_series.read(plain) == {"0": [(1.0, 10.0), (2.0, 20.0)]}  # in time order
    for text in ("time_s,watts\n", "when,power\n1,2\n", "time_s,watts\n1,many\n"):
        plain.write_text(text)
        with pytest.raises(AccelbenchError, match="nvidia-smi's CSV"):
            power_series.read(plain)


def test_the_meter_sums_the_devices_or_says_the_series_misses_the_window(tmp_path: Path) -> None:
    path = tmp_path / "power.csv"
    now = time.time()
    devices = zip("ab", (50, 70), strict=True)
    rows = [f"{now + t},{device},{watts}" for device, watts in devices for t in (-10, 10, 20)]
    path.write_text("time_s,device,watts\n" + "\n".join(rows) + "\n")
    meter = meters_series.meter(str(path))
    meter.start()
    drawn = meter.stop()
    assert drawn.method == "power series" and "2 device(s)" in drawn.scope
    assert drawn.avg_power_w == pytest.approx(120.0)  # 50 W and 70 W, all through the window
    path.write_text("time_s,watts\n1,10\n2,10\n")  # long before the window
    meter.start()
    missed = meter.stop()
    assert missed.method == "not available" and "do not cover the trial" in missed.scope


class _Prometheus(BaseHTTPRequestHandler):
    """A Prometheus range query's answer: two GPUs' constant board power, 100 W and 50 W, at
    every step asked for; any other path answers what is not Prometheus."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        asked = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path != "/api/v1/query_range":
            body = b"<html>not here</html>"
        else:
            start, end, step = (float(asked[k]) for k in ("start", "end", "step"))
            times = np.arange(start, end + step / 2, step)
            result = [
                {"metric": {"gpu": gpu}, "values": [[t, str(watts)] for t in times]}
                for gpu, watts in (("0", 100), ("1", 50))
            ]
            body = json.dumps(
                {"status": "success", "data": {"resultType": "matrix", "result": result}}
            ).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_prometheus_servers_range_query_is_a_series(tmp_path: Path) -> None:
    pytest.importorskip("httpx")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        meter = meters_series.meter(url)
        assert meter.name.endswith(meters_series.DCGM_POWER)
        meter.start()
        drawn = meter.stop()
        assert drawn.method == "power series" and drawn.avg_power_w == pytest.approx(150.0)
        assert meters_series.meter(f"{url}/?query=sum(watts)").name.endswith(" sum(watts)")
        with pytest.raises(AccelbenchError, match="give the server's URL"):
            meters_series.check(f"{url}/elsewhere")
    finally:
        server.shutdown()
        server.server_close()


def test_a_log_being_written_and_impossible_watts_are_skipped_not_integrated(
    tmp_path: Path,
) -> None:
    log = tmp_path / "power.csv"
    log.write_text(
        "time_s,watts\n0,100\n1,nan\n2,-40\n3,inf\n4,100\n5,1e309\n6,oops\n7"  # the last: cut
    )
    assert power_series.read(log) == {"0": [(0.0, 100.0), (4.0, 100.0)]}
    log.write_text("time_s,watts\n0,nan\n1,-1\n")
    with pytest.raises(AccelbenchError, match="no readable samples"):
        power_series.read(log)


class _HostilePrometheus(BaseHTTPRequestHandler):
    """A Prometheus server that answers as `mode` says."""

    mode = "trickle"

    def do_GET(self) -> None:
        self.send_response(200)
        if self.mode == "bomb":
            self.send_header("content-encoding", "gzip")
        self.end_headers()
        if self.mode == "trickle":  # a byte every 0.5 s, far longer than the deadline
            with contextlib.suppress(OSError):
                for _ in range(120):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.5)
            return
        answers = {
            "deep": b"[" * 200_000 + b"]" * 200_000,
            "bomb": gzip.compress(b" " * (64 << 20)),
            "nan": json.dumps(
                {"data": {"result": [{"metric": {}, "values": [[0, "NaN"], [1, "-5"]]}]}}
            ).encode(),
            "not a list": b'{"data": {"result": 7}}',
        }
        with contextlib.suppress(OSError):
            self.wfile.write(answers[self.mode])

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("mode", ["trickle", "deep", "bomb", "nan", "not a list"])
def test_a_hostile_prometheus_gives_a_trial_no_energy_with_the_reason(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("httpx")
    monkeypatch.setattr(meters_series, "SCRAPE_DEADLINE_S", 1.0)
    handler = type("Handler", (_HostilePrometheus,), {"mode": mode})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        meter = meters_series.meter(
            f"http://user:Hunter2secret@127.0.0.1:{server.server_address[1]}"
        )
        assert "Hunter2secret" not in meter.name
        meter.start()
        began = time.perf_counter()
        drawn = meter.stop()  # never raises: the trial's requests all stand
        assert time.perf_counter() - began < 30.0  # a 60 s trickle: the deadline ended it
        assert drawn.method == "not available" and drawn.joules is None
        assert "Prometheus" in drawn.scope and "Hunter2secret" not in drawn.scope
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("source", ["http://[::1", "http://host:port/"])
def test_a_malformed_prometheus_url_is_one_line(source: str) -> None:
    with pytest.raises(AccelbenchError, match="is not a URL"):
        meters_series.meter(source)
