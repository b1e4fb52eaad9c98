"""accelbench inside the tools centres already run: a ReFrame test library (reframe_check.py)
and a JUBE benchmark (examples/jube/). Nothing here is imported by accelbench itself."""
