"""The journal part of the Store protocol: step outcomes, attempts, step transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from cairn.store.records import (
    AttemptRecord,
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


class JournalStore(Protocol):
    """A run's journal: step outcomes and failed attempts."""

    async def load_journal(
        self, run_id: str, *, inputs: bool = False, after_seq: int = 0, limit: int | None = None
    ) -> list[StepRecord]:
        """Every recorded outcome of the run, in seq order.

        Each step's `input` is read only with `inputs` (for its history): a replay needs
        none, and they can be large. Without it, `input` is None. A page of a long
        history: only entries with seq > `after_seq`, at most `limit` of them.
        """
        ...

    async def journal_extent(self, run_id: str) -> tuple[int, int]:
        """How many entries the run's journal holds, and its highest seq ((0, 0) if none).

        One read that counts without loading them (the dashboard's run page and stream).
        """
        ...

    async def record_step(self, lease: Lease, step: StepRecord) -> None:
        """Commit a step outcome for a run held by `lease`. Raises LeaseLost if not held.

        On PostgreSQL a write whose reply was lost is sent again; if that second try fails
        the outcome of the first is unknown: StoreUnavailable with `.unknown` set.
        """
        ...

    async def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Commit a failed attempt of a step. Raises LeaseLost if not held."""
        ...

    async def load_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Every failed or interrupted attempt of the run, by execution, key, attempt."""
        ...

    async def upsert_step(self, lease: Lease, step: StepRecord) -> None:
        """Like record_step, but replaces an entry with the same key (a "waiting" one)."""
        ...
