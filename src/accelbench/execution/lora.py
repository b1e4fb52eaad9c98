"""LoRA fine-tuning: low-rank adapters (peft) on a model's chosen layers, every other weight
frozen, as MLPerf Training's Llama 2 70B LoRA benchmark fine-tunes (r 16, alpha 32)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelbench.errors import AccelbenchError

if TYPE_CHECKING:
    import torch

    from accelbench.records.spec import RunSpec


def adapt(model: torch.nn.Module, spec: RunSpec) -> torch.nn.Module:
    """The model with LoRA adapters of rank spec.lora_rank on spec.lora_targets (peft), only
    they trainable; no dropout, so that a step's work does not vary."""
    from peft import LoraConfig, get_peft_model

    targets: str | list[str] = (
        "all-linear" if spec.lora_targets == "all-linear" else spec.lora_targets.split(",")
    )
    assert spec.lora_rank is not None
    config = LoraConfig(
        r=spec.lora_rank,
        lora_alpha=spec.lora_alpha,  # type: ignore[arg-type]  # peft takes a float in fact
        target_modules=targets,
        lora_dropout=0.0,
    )
    try:
        return get_peft_model(model, config)
    except ValueError as exc:  # peft's words for targets the model does not have
        raise AccelbenchError(
            f"{spec.workload}: --lora-targets {spec.lora_targets}: {str(exc).splitlines()[0]}; "
            "give names of its linear layers (q_proj,v_proj) or all-linear"
        ) from None


def trainable(model: torch.nn.Module) -> int:
    """The weights the optimizer steps (all of them, but for frozen ones)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
