"""The backend interface: what a database really provides to run cairn's operations.

Everything else a store does is an operation (store/programs/): a program declared
`@operation` that the backend runs, `await store.write(op)` in a write transaction or
`await store.read(op)` without one. A backend adds waiting for work, a side channel for
heartbeats and step transactions, besides opening, closing and its health.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from cairn.store.programs.base import Operation
from cairn.store.protocol.journal import StepTransaction
from cairn.store.protocol.lifecycle import LifecycleStore
from cairn.store.protocol.workers import SideChannel
from cairn.store.stream_bells import StreamBells

T = TypeVar("T")


class Backend(LifecycleStore, Protocol):
    """Runs operations; waits for work; heartbeats and step transactions on the side."""

    async def write(self, op: Operation[T]) -> T:
        """Run `op` in a write transaction and return its outcome once committed.

        Writes the engine acknowledges to a workflow are durable when this returns. A
        backend may share one commit among concurrent writes, and may run `op` afresh
        (PostgreSQL does when the connection is lost before COMMIT, which rolls it back).
        """
        ...

    async def read(self, op: Operation[T]) -> T:
        """Run the read-only `op` (again, if the backend must retry) and return its outcome."""
        ...

    async def read_aside(self, op: Operation[T]) -> T:
        """`read`, for a long scan (a blob sweep) that must not hold up runs meanwhile.

        One snapshot of the database, read off the event loop's thread: SQLite, whose
        reads run on that thread, reads it on a connection of its own in a thread
        (a database in memory: on the loop); PostgreSQL's reads never hold the loop.
        """
        ...

    async def read_one_plan(self, op: Operation[T]) -> T:
        """`read`, for an op whose statements' best plan does not depend on their values.

        A backend that caches query plans may plan such statements once (PostgreSQL).
        """
        ...

    async def wait_for_work(self, timeout: float) -> None:
        """Return when runs may have become claimable, or after `timeout` seconds.

        A hint, not a promise: it may return with nothing to claim, and it cannot see
        everything (a dead worker's lease running out tells nobody), so callers still claim
        at least every `timeout` seconds: polling is the fallback. PostgreSQL listens for
        NOTIFY; SQLite sees this process's writes at once and other processes' commits
        within about 50 ms (PRAGMA data_version).
        """
        ...

    def stream_bells(self) -> StreamBells:
        """Where this process's readers of durable streams wait for new items.

        This process's appends ring them; PostgreSQL's also ring other processes' (NOTIFY
        cairn_streams, listened for once a reader asks). Elsewhere readers poll.
        """
        ...

    def side_channel(self) -> SideChannel | None:
        """A connection of its own for a heartbeat thread; None if the store has none.

        (SQLite `:memory:` has none: no other process can share it, so nobody else can
        judge its heartbeats.)
        """
        ...

    async def begin_step_transaction(
        self, *, sync: bool, timeout: float | None = None
    ) -> StepTransaction:
        """Open a transaction whose connection a `@cairn.transaction` step writes through.

        `sync`: the step's function is a plain one, run in a thread (PostgreSQL then hands
        out a blocking psycopg connection). `timeout`: the step's time limit in seconds,
        which the database enforces on each statement where it can (PostgreSQL's
        `statement_timeout` and `lock_timeout`). Raises StoreUnavailable while the
        database is away or the write lock is held elsewhere for long.
        """
        ...
