"""Text that wraps on purpose: the facts of `runs show` and `tasks show`, and tracebacks.

Rich's grid folded a long value at the column's edge, a run id included
(`...-2026-11` then `-30` on the next line, which no double-click copies whole), and a
traceback's long lines wrapped back to the first column, where they read as lines of
their own. Here text wraps at spaces only, each continuation indented (under the value,
or deeper than the traceback line it continues), and a word is never broken: an id, a
path or a URL longer than the line stays whole and runs past the edge, so the terminal
wraps it without a newline in it and a copy gets it whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

_WORD = re.compile(r"\S+")
# How far a traceback line's continuations are indented past the line's own indent.
CONTINUED = 4
# Values wrap within at least this many cells, however long the longest key.
NARROWEST = 20


def wrap(text: Text, width: int, later: int | None = None) -> list[Text]:
    """`text` in lines of at most `width` cells, broken at spaces only (styles kept).

    Lines after the first of each line of `text` get `later` cells (default `width`). A
    word wider than any line stays whole on the line it starts on (`File "/long/path",`
    rather than `File` alone). Newlines in `text` start new lines; blank lines are kept.
    """
    lines: list[Text] = []
    for part in text.split("\n", allow_blank=True):
        plain = part.plain
        start = end = None
        room = width
        widest = max(width, width if later is None else later)
        for match in _WORD.finditer(plain):
            if start is None or end is None:
                start, end = match.start(), match.end()
            elif cell_len(plain[start : match.end()]) <= room or cell_len(match[0]) > widest:
                end = match.end()  # it fits, or it fits no line: it stays with its context
            else:
                lines.append(part[start:end])
                start, end = match.start(), match.end()
                room = width if later is None else later
        lines.append(part[start:end] if start is not None else Text(""))
    return lines


def unbroken(line: Text) -> Text:
    """`line` as rich prints it without folding or cutting (it may be wider than the console)."""
    line.no_wrap = True
    line.overflow = "ignore"
    line.end = "\n"
    return line


class Facts:
    """`key  value` lines: keys in bold in a column, values wrapped under themselves.

    Values are `Text`, never markup (`[hook token]` in an argument is text).
    """

    def __init__(self, rows: Iterable[tuple[str, str | Text]]) -> None:
        self.rows = [(key, v if isinstance(v, Text) else Text(v)) for key, v in rows]

    def lines(self, width: int) -> Iterator[Text]:
        """The lines for a console `width` cells wide."""
        keys = max((len(key) for key, _ in self.rows), default=0)
        room = max(NARROWEST, width - keys - 2)
        for key, value in self.rows:
            for i, line in enumerate(wrap(value, room)):
                head = Text(key, style="bold") if i == 0 else Text("")
                head.pad_right(keys + 2 - head.cell_len)
                yield unbroken(head + line)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)


class Traceback:
    """A traceback whose long lines wrap at spaces, indented past the line they continue."""

    def __init__(self, text: str) -> None:
        self.text = text.rstrip()

    def lines(self, width: int) -> Iterator[Text]:
        """The lines for a console `width` cells wide."""
        for line in self.text.splitlines():
            body = line.lstrip(" ")
            indent = len(line) - len(body)
            room = max(NARROWEST, width - indent)
            parts = wrap(Text(body), room, max(NARROWEST, room - CONTINUED))
            for i, part in enumerate(parts):
                yield unbroken(Text(" " * (indent if i == 0 else indent + CONTINUED)) + part)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines(options.max_width)
