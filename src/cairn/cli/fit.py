"""Fitting a table's columns into a terminal's width: which columns show, and how wide.

Rich shrinks every column alike when a table is too wide, so one long error once squeezed
the run ids out of `cairn runs list`. Here the columns a row cannot be read without
always keep their width, the others are dropped in rank order when they do not fit, and
long text is cut (with an ellipsis, by the table) rather than the table being squeezed.
"""

from __future__ import annotations

from dataclasses import dataclass


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
