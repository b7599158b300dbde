"""The store's life: opening, closing, its dialect and its health."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Health(Protocol):
    """How recently a store could not reach its database (see `Store.health`)."""

    def trouble_at(self) -> float:
        """When (time.monotonic()) the store last met an outage or a long lock wait.

        0.0 if never. A worker judges other workers' heartbeats only after a whole lease
        without trouble: while the database was away, theirs could not be written either.
        """
        ...

    def trouble(self) -> None:
        """Note that the database is away or locked now (a heartbeat failed, say)."""
        ...

    def stalled_runs(self, seconds: float) -> dict[tuple[str, int], float]:
        """Runs (id, fence) with a wait for the database older than `seconds`; its age.

        Any thread. A store whose waits cannot stall for ever (SQLite) reports none.
        """
        ...

    def watch_loop(self, responsive_since: Callable[[], float] | None) -> None:
        """Age waits only while the event loop answers (a blocked loop is not a stall).

        `responsive_since` (any thread) gives when it last began answering again after a
        block, or now while it is blocked; None forgets it.
        """
        ...

    @property
    def unwritable(self) -> str | None:
        """Why this store can never write again (a read-only SQLite file), or None.

        Not a passing condition: a worker that sees it stops (see runtime/worker.py).
        """
        ...


class LifecycleStore(Protocol):
    """Opening and closing a store, and what it says of itself."""

    dialect: str
    # True when `wait_for_work` itself wakes for every known timer (wake times come with
    # this store's commits and other processes' notifications), so a worker need not
    # read `next_wake` before each wait.
    wakes_for_timers: bool
    # True when a write transaction's statements run on the event loop's thread (SQLite):
    # a long one stops every run of the process meanwhile, so housekeeping (retention)
    # keeps its transactions short by time, not only by row count.
    writes_on_loop: bool

    @property
    def health(self) -> Health:
        """When the store last met trouble (an outage, a long wait for a lock)."""
        ...

    async def open(self, *, migrate: bool = True) -> None:
        """Connect and apply pending migrations. Raises SchemaTooNew for a newer schema.

        `migrate=False` opens only a database that has cairn's schema at this version
        and raises `migrate.SchemaMissing` for any other, creating and changing nothing
        (no file, no table): what commands that only read or steer runs open.
        """
        ...

    async def close(self) -> None:
        """Flush pending writes and disconnect."""
        ...
