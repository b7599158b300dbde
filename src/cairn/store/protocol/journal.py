"""A step transaction: the transaction a `@cairn.transaction` step writes through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from cairn.store.records import (
    Lease,
    StepRecord,
)


class StepTransaction(Protocol):
    """One open database transaction for one attempt of a `@cairn.transaction` step.

    The user's writes go through `connection`; `commit` adds the step's journal entry to
    the same transaction, fenced by the run's lease, and commits both or neither. Until
    `commit` or `rollback` returns, the store holds its write path for this transaction.
    """

    @property
    def connection(self) -> Any:
        """The driver's connection, inside the transaction (see docs/howto/transaction.md)."""
        ...

    def state(self) -> Literal["open", "aborted", "ended"]:
        """Its state: open, aborted (a statement failed) or ended (by the user's code)."""
        ...

    async def commit(
        self, lease: Lease, step: StepRecord, marks: Sequence[StepRecord] = ()
    ) -> None:
        """Write `marks` (upserted) and `step` fenced by `lease`, then COMMIT.

        Raises LeaseLost (rolled back) if the run is not held; StoreError if the database
        failed it (rolled back), or StoreUnavailable with `.unknown` if the reply to COMMIT
        was lost. Always ends the transaction and frees the write path.
        """
        ...

    async def rollback(self) -> None:
        """Undo everything the transaction wrote and free the write path (idempotent)."""
        ...

    def interrupt(self) -> None:
        """Stop the statement running on `connection` now; it fails with the driver's error.

        Called from any thread (it may block briefly: PostgreSQL sends a cancel request),
        while the step's function still runs, so that a statement blocked on a lock or
        running long returns to it. A no-op when no statement runs.
        """
        ...
