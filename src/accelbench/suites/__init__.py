"""Acceptance suites: sweep files shipped with accelbench, each cell at the configuration of a
published figure in references.csv, so that `accelbench run --suite NAME` and then
`accelbench compare --reference` say whether a node delivers what it should.

A suite is a TOML file here: a description, then parts. A part is a sweep ([part.fixed] and
[part.axes], as a sweep file) with the device types it is for (`devices = ["cuda"]`; none: any),
how many of them the host needs (`min_devices`) and the published figure it reproduces, in
words. Settings given on the command line replace a part's own, as with --sweep.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import Field, ValidationError

from accelbench.errors import AccelbenchError
from accelbench.orchestration.sweep import SweepFile
from accelbench.records.environment import Environment
from accelbench.records.frozen import Frozen

FOLDER = Path(__file__).parent


class Part(SweepFile):
    """Cells of one published configuration."""

    figure: str
    """The published figure(s) the cells reproduce: source and table, in words."""
    devices: list[str] = Field(default_factory=list)
    """Device types the part runs on (cuda, cpu, ...); empty: any."""
    min_devices: int = Field(default=1, gt=0)
    """Devices of that type the host must have (a two-GPU figure needs two)."""


class Suite(Frozen):
    description: str
    parts: list[Part] = Field(alias="part")


def names() -> list[str]:
    return sorted(p.stem for p in FOLDER.glob("*.toml"))


def load(name: str) -> Suite:
    """The suite `name`; an unknown name raises with the list."""
    path = FOLDER / f"{name}.toml"
    if name not in names():
        raise AccelbenchError(
            f"no suite {name!r}: give one of {', '.join(names())} (`accelbench suites` lists them)"
        )
    try:
        return Suite.model_validate(tomllib.loads(path.read_text()))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:  # a packaging error, not the user's
        raise AccelbenchError(f"suite {name} is malformed: {exc}") from None


def parts_for(suite: Suite, env: Environment) -> list[Part]:
    """The parts of `suite` that this platform can run: its device type, enough devices."""
    count = len(env.devices) if env.device_type != "cpu" else 1
    return [
        p
        for p in suite.parts
        if (not p.devices or env.device_type in p.devices) and count >= p.min_devices
    ]
