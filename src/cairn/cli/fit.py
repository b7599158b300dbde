"""Fitting a table's columns into a terminal's width: which columns show, and how wide.

Rich shrinks every column alike when a table is too wide, so one long error once squeezed
the run ids out of `cairn runs list`. Here the columns a row cannot be read without
always keep their width, the others are dropped in rank order when they do not fit, and
long text is cut (with an ellipsis, by the table) rather than the table being squeezed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text


@dataclass(frozen=True, slots=True)
class Want:
    """What one column would like."""

    name: str
    """The column's heading."""
    natural: int
    """The width of its widest cell (heading included), in terminal cells (output.cells)."""
    least: int
    """The narrowest it may be cut to; `natural` for a column that must not be cut."""
    rank: int = 0
    """0 for a column always shown; else the order in which columns get room (1 first)."""
    ample: int | None = None
    """The width it gets before columns of a later rank join (None: `natural`)."""


def fit(wants: list[Want], width: int, *, gap: int = 2) -> dict[str, int]:
    """The width of each column shown, in `wants` order, so the row fits in `width`.

    Rank-0 columns always show, at their ample width if there is room, else cut toward
    their least. The others join in rank order while each fits at its least width, and
    take up to their `ample` width before the next joins. Room left over widens the
    columns toward their natural width, in rank order. A terminal narrower than the
    rank-0 columns at their least gets them anyway (the lines are then too wide).
    """
    order = sorted(range(len(wants)), key=lambda i: wants[i].rank)
    shown = {i: min(wants[i].least, wants[i].natural) for i in order if wants[i].rank == 0}
    used = sum(shown.values()) + gap * max(0, len(shown) - 1)
    for i in shown:  # up to its ample width: the rest is room the other columns may take
        want = wants[i]
        ample = want.natural if want.ample is None else min(want.ample, want.natural)
        grow = max(0, min(ample - shown[i], width - used))
        shown[i] += grow
        used += grow
    for i in order:
        if i in shown:
            continue
        want = wants[i]
        least = min(want.least, want.natural)
        if used + gap + least > width:
            continue
        ample = want.natural if want.ample is None else min(want.ample, want.natural)
        shown[i] = max(least, min(ample, width - used - gap))
        used += gap + shown[i]
    for i in order:
        if i in shown:
            grow = min(wants[i].natural - shown[i], max(0, width - used))
            shown[i] += grow
            used += grow
    return {wants[i].name: shown[i] for i in sorted(shown)}


def unpadded(
    console: Console, options: ConsoleOptions, table: RenderableType
) -> list[list[Segment]]:
    """`table`'s lines (each ending in its newline) without the spaces rich pads to width.

    Rich pads a table's last cell to its column's width: each line of `cairn runs list`
    ended in spaces, which a copy took along and a `diff` of two listings showed.
    """
    lines = []
    for line in console.render_lines(table, options, pad=False):
        while line and not line[-1].control and not line[-1].text.rstrip(" "):
            line.pop()
        if line and not line[-1].control:
            last = line.pop()
            line.append(Segment(last.text.rstrip(" "), last.style))
        lines.append([*line, Segment.line()])
    return lines


def elide(text: str | Text, width: int) -> str | Text:
    """`text` cut to `width` cells in the middle (`exchange.wo…ess_order`), when longer."""
    plain = text.plain if isinstance(text, Text) else text
    if cell_len(plain) <= width or width < 5:
        return text
    head = (width - 1) // 3
    tail = width - 1 - head
    while cell_len(plain[:head]) + cell_len(plain[-tail:]) > width - 1 and tail > 1:
        tail -= 1  # wide characters
    cut = f"{plain[:head]}…{plain[-tail:]}"
    return Text(cut, style=text.style) if isinstance(text, Text) else cut
