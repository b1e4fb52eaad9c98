"""The cell's own process: `python -m accelbench.cell.child` runs one spec (runner) or probes the
inputs on the meta device (preflight) and writes its answer for the parent."""
