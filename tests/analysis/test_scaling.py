"""Pairing multi-replica rows with their cell's one-replica row, whole or as rows come."""

from __future__ import annotations

import pytest

from accelbench.analysis.scaling import Pairing, Scale, pair_up


def _row(
    cell: str, replicas: int, rate: float | None, threads: int = 2, status: str = "ok"
) -> Scale:
    return Scale(
        alone=f"{cell}-{replicas}",
        base=f"{cell}-1",
        replicas=replicas,
        items_per_s=rate,
        status=status,
        threads=threads,
    )


def test_rows_paired_as_they_come_pair_as_a_whole_list_does() -> None:
    rows = [
        _row("a", 1, 10.0),
        _row("a", 2, 36.0),
        _row("a", 1, 20.0),  # the cell's last base: the one both pair with
        _row("b", 2, 30.0),  # no base
        _row("a", 2, 50.0, threads=1),  # unlike threads: paired, no speed-up
        _row("c", 1, 9.0, status="oom"),
        _row("c", 2, 18.0),  # its base failed
        _row("a", 2, None),  # not measured
    ]
    pairing: Pairing[Scale] = Pairing()
    for number, row in enumerate(rows):
        pairing.add(number, row)
    found = pairing.speedups()
    assert {n: (p.row, p.base) for n, p in found.items()} == {1: (rows[1], rows[2])}
    assert found[1].speedup == pytest.approx(1.8)
    whole = [p for p in pair_up(rows) if p.speedup is not None]
    assert [(p.row, p.base) for p in whole] == [(p.row, p.base) for p in found.values()]
    assert [p.row for p in pair_up(rows)] == [rows[1], rows[4]]
