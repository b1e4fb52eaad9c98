from __future__ import annotations

import os

import pytest
import torch

from accelbench.execution import distributed

from ..conftest import tiny


def test_cpu_lists_as_the_kernel_writes_them() -> None:
    assert distributed._cpu_list("0-3,8-9,12\n") == {0, 1, 2, 3, 8, 9, 12}
    assert distributed._cpu_list("") == set()


def test_numa_node_of_this_process() -> None:
    node = distributed.numa_node()
    nodes = [p for p in os.listdir("/sys/devices/system/node") if p.startswith("node")]
    if len(nodes) == 1:
        assert node == 0  # one node: every CPU is on it
    else:
        assert node is None or 0 <= node < len(nodes)


def test_one_replica_needs_no_process_group() -> None:
    assert distributed.join(tiny(), "cpu") is distributed.SINGLE
    model = torch.nn.Linear(2, 2)
    assert distributed.wrap(model, tiny(), torch.device("cpu")) is model
    assert distributed.gather({"x": 1}) == [{"x": 1}]
    assert distributed.first_says(True) is True


def test_a_rank_started_without_torchrun_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(
        distributed.AccelbenchError,
        match="2 processes but runs in 1: start it with `accelbench run`",
    ):
        distributed.join(tiny(replicas=2), "cpu")
