"""Published results shipped with the tool (references.csv), to set runs beside.

Each row is one published figure, copied from its source table with its conditions (platform,
device count, replicas, micro batch, framework) and the accelbench workload it corresponds to.
So far: the four tables of the PEARC '22 study (seed 003).
"""

from __future__ import annotations

import csv
import io
from functools import cache
from importlib import resources

from pydantic import field_validator

from accelbench import workloads
from accelbench.spec import Frozen


class Reference(Frozen):
    source: str
    table: str
    model: str
    """The model as the source names it."""
    workload: str | None
    """The accelbench workload that runs the same model, if any."""
    platform: str
    num_devices: int
    replicas: int | None
    instances: int | None
    micro_batch: int | None
    framework: str
    precision_published: str | None
    """The precision as the source writes it, when it gives one."""
    metric: str
    value: float
    unit: str
    note: str | None

    @field_validator("workload")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        return None if name is None else workloads.check_name(name)


@cache
def load() -> tuple[Reference, ...]:
    """Every shipped reference, in file order."""
    text = resources.files("accelbench").joinpath("references.csv").read_text()
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    return tuple(
        Reference.model_validate({k: (v or None) for k, v in row.items()})
        for row in csv.DictReader(lines)
    )


def query(workload: str | None = None, platform: str | None = None) -> list[Reference]:
    """References of this workload, on platforms whose name contains `platform`."""
    return [
        r
        for r in load()
        if (workload is None or r.workload == workload)
        and (platform is None or platform.lower() in r.platform.lower())
    ]
