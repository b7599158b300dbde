"""Which writes a piece of work asked of its store, and which were withdrawn unmade.

The dashboard cuts a request's work off at its deadline (dashboard/target.py). Whether
its 503 may say "nothing was changed" depends on what the work's writes became: a write
still queued for the write lock when its writer gives up is withdrawn (SQLite: the
next flush drops it), and so is a PostgreSQL transaction whose COMMIT was not sent yet, or
a write of PostgreSQL's group commit not sent yet (still queued, or waiting for a
connection); a COMMIT (or a lone statement, or a batch) already sent may be made yet.
Counted only where a caller set a `Tally` (a ContextVar read once per write, and nothing
more, everywhere else).
"""

from __future__ import annotations

from contextvars import ContextVar


class Tally:
    """The writes of one piece of work: asked for, and withdrawn before they were made."""

    __slots__ = ("asked", "ended", "withdrawn")

    def __init__(self) -> None:
        self.asked = 0
        self.withdrawn = 0
        self.ended = False  # the work is over (returned, raised, or cancelled)

    @property
    def unchanged(self) -> bool:
        """True if every write the work asked for was withdrawn (or it asked for none)."""
        return self.asked == self.withdrawn


TALLY: ContextVar[Tally | None] = ContextVar("cairn_write_tally", default=None)
"""The tally of the work running in this context, if its caller keeps one."""


def asked() -> Tally | None:
    """Count a write asked for in this context; its tally (None if nobody keeps one)."""
    tally = TALLY.get()
    if tally is not None:
        tally.asked += 1
    return tally
