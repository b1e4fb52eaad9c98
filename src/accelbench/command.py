"""The `accelbench` command (and `python -m accelbench`): a command that runs cells starts its
cell server first, so that the server's import of torch (2.5 s here) runs beside the command
line's own imports (0.8 s) instead of after them."""

from __future__ import annotations

import sys

CELL_COMMANDS = frozenset({"run", "tune"})
"""Commands that run cells, each through a cell server (orchestration.forks)."""


def main() -> None:
    asked_help = {"--help", "-h"} & set(sys.argv)
    if len(sys.argv) > 1 and sys.argv[1] in CELL_COMMANDS and not asked_help:
        from accelbench.orchestration import forks

        forks.start_early()
    from accelbench.cli import main as cli_main

    cli_main()
