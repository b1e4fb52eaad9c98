"""What a result is made of, torch-free at import: the spec, the result and its metrics, the
statistics and the delivered rate, precisions, and the environment, energy and host activity
records (whose meters import torch and NVML when they run)."""
