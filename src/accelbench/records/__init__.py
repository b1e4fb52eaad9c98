"""What a result is made of, as data and torch-free at import: the spec, the result and its
metrics, the statistics and the delivered rate, precisions, and the environment, energy and host
activity records. What measures them is in execution (meters, precision) and cell (environment).
"""
