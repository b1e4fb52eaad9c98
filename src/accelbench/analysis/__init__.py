"""Analysis, as data: verdicts, comparisons, scaling, convergence, objectives and advice, and the
published references, each returning dataclasses and enums for report/ to put in words."""
