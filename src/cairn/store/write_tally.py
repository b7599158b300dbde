"""Which writes a piece of work asked of its store, and which were withdrawn unmade.

The dashboard cuts a request's work off at its deadline (dashboard/target.py). Whether
its 503 may say "nothing was changed" depends on what the work's writes became: a write
still queued for the write lock when its writer gives up is withdrawn (SQLite: the
next flush drops it), and so is a PostgreSQL transaction whose COMMIT was not sent yet, or
a write of PostgreSQL's group commit not sent yet (still queued, or in a batch whose
lane, or whose caller, waits for a connection); a COMMIT (or a lone statement, or a
batch) already sent may be made yet.
Counted only where a caller keeps a `Tally` (`kept`). Everywhere else a write costs a
look at `ACTIVE`, an empty set: no ContextVar read on a step's path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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

ACTIVE: set[Tally] = set()
"""The tallies of work not ended yet, in any thread: writes look at TALLY only if one is.

A set, not a count: `add` and `discard` are each one call, whole under the GIL, where
`+= 1` from two threads (two `Client`s' loops) could lose one."""


@contextmanager
def kept(tally: Tally) -> Iterator[Tally]:
    """Count the writes asked in this context (and the tasks it starts) in `tally`.

    On exit the work is over: `tally.ended` is set and its writes are no longer counted.
    """
    token = TALLY.set(tally)
    ACTIVE.add(tally)
    try:
        yield tally
    finally:
        tally.ended = True
        ACTIVE.discard(tally)
        TALLY.reset(token)


def asked() -> Tally | None:
    """Count a write asked for in this context; its tally (None if nobody keeps one)."""
    if not ACTIVE:
        return None
    tally = TALLY.get()
    if tally is not None:
        tally.asked += 1
    return tally


def withdrawn() -> None:
    """Count a write asked for in this context as withdrawn before it was made."""
    if ACTIVE and (tally := TALLY.get()) is not None:
        tally.withdrawn += 1
