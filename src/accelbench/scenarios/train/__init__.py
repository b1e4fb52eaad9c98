"""The training scenario: epochs of optimizer steps on host data (or a few batches kept on the
device, with inputs_on_device), timed per step; its headline is the delivered rate over the
steady state (measure.py). plugin.py is what the core reads of it."""
