"""Turning analysis into text, tables and figures: cells.py names a cell and formats values;
results.py, time_to_train.py, compare.py and advice.py write each command's lines; tables.py,
figures.py and document.py draw them for the terminal, Markdown and one HTML page."""
