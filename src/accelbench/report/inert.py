"""Text from results or from a user made inert for each output, in one place: stored names,
reasons and paths can hold anything an import or a model's exception put there.

- terminal: no Rich markup is read (a `[/x]` stays text) and control characters are shown
  escaped (`\\x1b`), so no sequence can clear the screen, retitle the window, plant a link or
  query the terminal;
- CSV: a cell that a spreadsheet would run as a formula (starting with = + - @, a tab or a
  carriage return) is prefixed with a quote, as OWASP recommends;
- Markdown: the characters that would make a table row, a line break, a link or an HTML tag
  escaped.
"""

from __future__ import annotations

import html
import math
import re

from rich.text import Text

_KEEP = "\n\t"
_CONTROL = {
    c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), *range(0x7F, 0xA0)) if chr(c) not in _KEEP
}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])|&(?=[#A-Za-z])")
_MARKDOWN_ANY = re.compile(r"[\\`*_\[\]|~<&]")
"""Any character markdown() may change in printable text (a site's cells have none mostly)."""


def plain(text: str) -> str:
    """The text with every control character but newline and tab written as an escape."""
    return text if text.isprintable() else text.translate(_CONTROL)


def line(text: str) -> str:
    """The text as one line: every control character escaped, newline and tab too."""
    if text.isprintable():  # no control character (C0, C1, DEL) at all
        return text
    return plain(text).replace("\n", "\\n").replace("\t", "\\t")


def terminal(text: str) -> Text:
    """The text for the terminal: its characters as they are, never markup or control."""
    return Text(plain(text))


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: a string that starts like a formula gets a
    leading quote. Numbers stay numbers (a negative number is not a formula); a NaN or an
    infinity is the text the CSV writes of it ("nan", "inf"), so that a row of cells is
    standard JSON (report.tabular.flat_text)."""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_START) else value
    if type(value) is float and not math.isfinite(value):
        return str(value)
    return value


def markdown(text: str) -> str:
    """One Markdown table cell or list item: Markdown's special characters escaped (no link,
    emphasis or table rule can form), a < or & that could start an HTML tag or entity
    escaped (a plain "<1" stays as it reads), line breaks as spaces."""
    if text.isprintable() and not _MARKDOWN_ANY.search(text):  # no line break, nothing special
        return text
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", plain(text))
    text = _HTML_START.sub(lambda m: html.escape(m.group()), text)
    return " ".join(text.splitlines())
