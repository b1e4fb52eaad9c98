from __future__ import annotations

from accelbench.cell.environment import capture, resolve_device


def test_capture_on_cpu() -> None:
    env = capture("cpu")
    assert env.device_type == "cpu"
    assert env.platform == env.cpu_model
    assert env.num_cpu_threads >= 1 and env.num_numa_nodes >= 1 and env.host_mem_gib > 0
    assert {"python", "torch", "timm", "transformers", "accelbench"} <= set(env.versions)
    assert env.cuda_capability is None


def test_fingerprint_is_stable_between_captures() -> None:
    assert capture("cpu").fingerprint() == capture("cpu").fingerprint()


def test_auto_resolves_to_what_torch_reports() -> None:
    import torch

    accelerator = torch.accelerator.current_accelerator(check_available=True)
    assert resolve_device("auto") == (accelerator.type if accelerator else "cpu")
    assert resolve_device("cpu") == "cpu"
