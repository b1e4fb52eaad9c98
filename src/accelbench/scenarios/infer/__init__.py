"""The inference scenario: forward passes of one batch at a time under inference_mode, each
timed to its answer, copy from the host included (measure.py). plugin.py is what the core reads
of it."""
