"""When a store last met trouble: an outage, or a wait for a lock longer than a moment.

Workers read it before judging others dead by their heartbeats: while this process could
not write to the database, nobody else's heartbeat could be written either (a server
restart, a connection holding SQLite's write lock), so old heartbeats prove nothing then.
It also says when the store can never write again (`unwritable`): trouble that does not
pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cairn.store.waits import Waits

# A write that waited this long for the database counts as trouble. Heartbeats come every
# lease / 3, so a wait shorter than a second cannot age one past any sane lease.
LONG_WAIT = 1.0


class StoreHealth:
    """The monotonic time of the last trouble; written from any thread (a float store)."""

    __slots__ = ("_trouble_at", "_unwritable", "waits")

    def __init__(self) -> None:
        self._trouble_at = 0.0
        self._unwritable: str | None = None
        # The waits for the database in flight (registered by stores that can stall).
        self.waits = Waits()

    def stalled_runs(self, seconds: float) -> dict[tuple[str, int], float]:
        """Runs (id, fence) whose database work has waited longer than `seconds`, and how long."""
        return self.waits.stalled_runs(seconds)

    def watch_loop(self, responsive_since: Callable[[], float] | None) -> None:
        """Age waits only while the event loop answers (see `Waits.watch_loop`)."""
        self.waits.watch_loop(responsive_since)

    @property
    def unwritable(self) -> str | None:
        """Why the store can never write again, or None (see `cannot_write`)."""
        return self._unwritable

    def cannot_write(self, reason: str) -> None:
        """The database refuses every write for good (the first reason is kept)."""
        if self._unwritable is None:
            self._unwritable = reason

    def trouble_at(self) -> float:
        """When (time.monotonic()) trouble was last seen; 0.0 if never."""
        return self._trouble_at

    def trouble(self) -> None:
        """The database is away or locked now."""
        self._trouble_at = time.monotonic()

    def waited(self, seconds: float) -> None:
        """A request succeeded after waiting `seconds` (for a lock, or through retries)."""
        if seconds >= LONG_WAIT:
            self.trouble()
