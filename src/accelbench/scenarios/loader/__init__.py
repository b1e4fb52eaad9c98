"""The loader scenario: the input pipeline by itself, the ceiling a model's training rate can
reach on this host. The workload's DataLoader (its synthetic items or `--data`, `--workers`,
pinned memory on CUDA) is drawn from as training draws from it, and nothing else runs: no model,
no copy to the device. Its headline is items per second over the steady epochs, with the
interval and verdicts of any cell's rate; `accelbench roofline` sets a model's rate beside it.
plugin.py is what the core reads of it.
"""
