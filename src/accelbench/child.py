"""The entry point of a cell's or a probe's process: `python -m accelbench.child cell|env|check ...`.

A module the package does not import, so that runpy finds nothing to warn about (which, printed
first, became the reason of a cell that died without one)."""

import sys

from accelbench.launch import child_main

if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1:]))
