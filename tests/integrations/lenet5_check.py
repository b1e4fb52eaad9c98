"""A check of the ReFrame test library, run by ReFrame itself in test_reframe.py: lenet5 on the
CPU, short, against a reference its throughput meets (any positive rate) and one it cannot."""

import sys

import reframe as rfm

from accelbench.integrations.reframe_check import AccelbenchCell

OPTIONS = ["--batch-size", "32", "--epochs", "2", "--steps-per-epoch", "200", "--device", "cpu"]


@rfm.simple_test
class Lenet5Meets(AccelbenchCell):
    workload = "lenet5"
    options = OPTIONS
    accelbench = f"{sys.executable} -m accelbench"
    reference = {"*": {"throughput": (1.0, 0, None, "items/s")}}  # noqa: RUF012 (at least 1 item/s)


@rfm.simple_test
class Lenet5Misses(AccelbenchCell):
    workload = "lenet5"
    options = OPTIONS
    accelbench = f"{sys.executable} -m accelbench"
    reference = {"*": {"throughput": (1e12, -0.05, None, "items/s")}}  # noqa: RUF012 (a trillion items/s)
