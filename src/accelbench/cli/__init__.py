"""The command line: list, env, run, results, report, compare, fleet, accept, roofline, history, export,
import, references, slurm, recommend, tune. app.py holds the frame and what commands share; each
other module registers its commands on import."""

from accelbench.cli import acceptance, advice, history, results, run, slurm, transfer, tune  # noqa: F401
from accelbench.cli.app import app, main

__all__ = ["app", "main"]
