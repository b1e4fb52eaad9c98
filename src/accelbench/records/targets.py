"""Time-to-train's target: a held-out metric, a direction and a value, such as val_loss<=0.02."""

from __future__ import annotations

import math
import re
from typing import Literal

Metric = Literal["val_loss", "val_accuracy"]
_TARGET = re.compile(r"\s*(val_loss|val_accuracy)\s*(<=|>=)\s*([0-9.eE+-]+)\s*")


def parse_target(text: str) -> tuple[Metric, str, float]:
    """(metric, "<=" or ">=", value) of a target such as "val_loss<=0.02"; raises if malformed."""
    match = _TARGET.fullmatch(text)
    try:
        value = float(match.group(3)) if match else None
    except ValueError:
        value = None
    if match is None or value is None:
        raise ValueError(
            f"target {text!r} is not METRIC<=VALUE or METRIC>=VALUE with METRIC val_loss or "
            "val_accuracy, e.g. val_loss<=0.02"
        )
    metric, sign = match.group(1), match.group(2)
    reachable = (
        (sign, 0 < value < math.inf) == ("<=", True)
        if metric == "val_loss"
        else (sign, 0 < value <= 1) == (">=", True)
    )
    if not reachable:
        raise ValueError(
            f"target {text!r} can never be reached: give val_loss<=VALUE above 0, or "
            "val_accuracy>=VALUE from 0 to 1"
        )
    return metric, sign, value  # type: ignore[return-value]
