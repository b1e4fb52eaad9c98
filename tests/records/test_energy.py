from __future__ import annotations

from pathlib import Path

import pytest
import torch

from accelbench.execution.meters.energy import EnergyMeter
from accelbench.records.energy import EnergyMetrics, combine

from ..conftest import needs_cuda


def fake_rapl(root: Path, packages: int = 2) -> list[Path]:
    domains = []
    for p in range(packages):
        domain = root / f"intel-rapl:{p}"
        (domain / f"intel-rapl:{p}:0").mkdir(parents=True)  # a core sub-domain: not counted
        (domain / f"intel-rapl:{p}:0" / "energy_uj").write_text("5\n")
        (domain / "energy_uj").write_text("1000000\n")
        (domain / "max_energy_range_uj").write_text("262143328850\n")
        domains.append(domain)
    return domains


def test_rapl_packages_are_summed(tmp_path: Path) -> None:
    a, b = fake_rapl(tmp_path)
    meter = EnergyMeter(torch.device("cpu"), powercap=tmp_path)
    meter.start()
    (a / "energy_uj").write_text("3000000\n")  # +2 J
    (b / "energy_uj").write_text("1500000\n")  # +0.5 J
    energy = meter.stop()
    assert energy.method == "rapl" and energy.scope == "CPU packages (2)"
    assert energy.joules == pytest.approx(2.5)
    assert energy.avg_power_w is not None and energy.avg_power_w > 0


def test_rapl_counter_wrapping_around(tmp_path: Path) -> None:
    [domain] = fake_rapl(tmp_path, packages=1)
    (domain / "max_energy_range_uj").write_text("2000000\n")
    meter = EnergyMeter(torch.device("cpu"), powercap=tmp_path)
    meter.start()
    (domain / "energy_uj").write_text("500000\n")  # 1.0 -> 2.0 (wrap) -> 0.5: 1.5 J
    assert meter.stop().joules == pytest.approx(1.5)


def test_unreadable_or_absent_rapl_is_not_available(tmp_path: Path) -> None:
    meter = EnergyMeter(torch.device("cpu"), powercap=tmp_path / "none")
    meter.start()
    energy = meter.stop()
    assert energy.method == "not available" and energy.joules is None


@needs_cuda
def test_nvml_energy_counter_over_gpu_work() -> None:
    device = torch.device("cuda")
    meter = EnergyMeter(device)
    a = torch.randn(8192, 8192, device=device)
    meter.start()
    for _ in range(200):
        a @ a
    torch.cuda.synchronize()
    energy = meter.stop()
    assert energy.method == "nvml-energy-counter"
    assert energy.joules is not None and energy.joules > 0
    assert energy.num_samples > 0 and energy.sm_clock_mhz_median
    assert (
        energy.power_limit_w
        and energy.peak_power_w
        and energy.peak_power_w <= 2 * energy.power_limit_w
    )


def test_ranks_add_up_gpu_boards_and_count_a_host_counter_once() -> None:
    def board(joules: float, reasons: list[str]) -> EnergyMetrics:
        return EnergyMetrics(
            method="nvml-energy-counter",
            scope="GPU 0 board",
            joules=joules,
            avg_power_w=joules / 10,
            power_limit_w=700.0,
            default_power_limit_w=700.0,
            sm_clock_mhz_median=1980.0,
            throttle_reasons=reasons,
            num_samples=100,
        )

    gpus = combine(
        [("a", board(3000, [])), ("a", board(3200, ["sw-thermal"])), ("b", board(3100, []))]
    )
    assert gpus.joules == 9300 and gpus.avg_power_w == pytest.approx(930)
    assert gpus.power_limit_w == 2100 and gpus.throttle_reasons == ["sw-thermal"]
    assert gpus.default_power_limit_w == 2100
    assert gpus.scope == "3 GPU boards on 2 host(s)"
    package = EnergyMetrics(method="rapl", scope="CPU packages (2)", joules=50.0, avg_power_w=5.0)
    cpus = combine([("a", package), ("a", package), ("b", package)])
    assert cpus.joules == 100.0 and cpus.scope == "CPU packages of 2 host(s)"
    absent = EnergyMetrics(method="not available", scope="CPU")
    assert combine([("a", package), ("b", absent)]).joules is None


@pytest.mark.parametrize("key", ["energy_accumulator", "power"])  # amdsmi >= 6.2.1, older
def test_an_amd_gpus_energy_counter_is_read_by_amdsmi(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    from types import SimpleNamespace

    # A ROCm build whose device 0 sits at PCI 0000:c1:00 (the second of two boards amdsmi sees).
    ticks = iter([1000, 1000, 61000])  # the meter's check, its start, its stop
    fake = SimpleNamespace(
        amdsmi_init=lambda: None,
        amdsmi_get_processor_handles=lambda: ["a", "b"],
        amdsmi_get_gpu_device_bdf=lambda h: {"a": "0000:41:00.0", "b": "0000:C1:00.0"}[h],
        amdsmi_get_energy_count=lambda h: (
            {key: next(ticks), "counter_resolution": 15.3} if h == "b" else {}
        ),
    )
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0xC1, pci_device_id=0)
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    meter = EnergyMeter(torch.device("cuda", 0))
    meter.start()
    reading = meter.stop()
    assert reading.method == "amdsmi-energy-counter" and reading.scope == "GPU 0 board"
    assert reading.joules == pytest.approx(60000 * 15.3 / 1e6)  # 0.918 J
    ranks = combine([("h", reading), ("h", reading)])
    assert ranks.joules == pytest.approx(2 * 0.918) and ranks.scope == "2 GPU boards on 1 host(s)"


def test_an_amd_gpu_amdsmi_cannot_read_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "amdsmi", None)  # not installed
    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    meter = EnergyMeter(torch.device("cuda", 0))
    meter.start()
    assert meter.stop().method == "not available"
