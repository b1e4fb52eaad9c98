"""The commit a built package records: baked whole by setuptools-scm, or read from its version."""

from __future__ import annotations

import sys
import types

import pytest

from accelbench.cell import environment


@pytest.mark.parametrize(
    ("baked", "found"),
    [
        ({"__commit__": "g202901fc01b26d2bc92b", "__dirty__": False}, "202901fc01b2"),
        ({"__commit__": "g202901fc01b26d2bc92b", "__dirty__": True}, "202901fc01b2-dirty"),
        # A wheel built from the sdist, where git is gone: the version's short commit.
        ({"__version__": "0.1.dev382+g202901fc0", "__commit__": None}, "202901fc0"),
        ({"__version__": "0.1.dev382+g202901fc0.d20261127"}, "202901fc0-dirty"),
        ({"__version__": "0.1.0", "__commit__": None}, None),  # a release's tag names it
    ],
)
def test_a_built_package_names_the_commit_it_was_built_from(
    baked: dict[str, object], found: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("accelbench._version")
    module.__dict__.update(baked)
    monkeypatch.setitem(sys.modules, "accelbench._version", module)
    assert environment._built_commit() == found
