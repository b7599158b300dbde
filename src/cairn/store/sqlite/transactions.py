"""SQLite transactions of `@cairn.transaction` steps: the user's writes and the checkpoint.

The store's group commit is held while one is open (its writes queue and commit after),
so nothing else of this process shares or waits inside the transaction. A file database
gives the step a connection of its own, so that the store's reads meanwhile see only
what committed; `:memory:` has only the store's connection, so the step writes on that.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Literal

from cairn.errors import StoreUnavailable
from cairn.store.programs import journal
from cairn.store.protocol import LeaseLost
from cairn.store.records import Lease, StepRecord
from cairn.store.sqlite.connections import classify, connect_for_steps, is_busy, run
from cairn.store.sqlite.failures import WriteFailures

# Waiting for the write lock another process holds: 1 ms doubling to 50 ms, 30 s at most.
_FIRST_RETRY = 0.001
_LAST_RETRY = 0.05
_GIVE_UP_AFTER = 30.0


async def begin_immediate(conn: sqlite3.Connection, where: str) -> None:
    """BEGIN IMMEDIATE on `conn`, waiting on the loop (not in SQLite) for the write lock."""
    delay = _FIRST_RETRY
    started = time.monotonic()
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.Error as exc:
            if not is_busy(exc):
                raise classify(where, exc) from exc
            if time.monotonic() - started > _GIVE_UP_AFTER:
                raise StoreUnavailable(
                    f"database {where}: the write lock stayed taken for {_GIVE_UP_AFTER:g}s"
                ) from exc
        await asyncio.sleep(delay)
        delay = min(delay * 2, _LAST_RETRY)


def own_connection(path: str, synchronous: str, failures: WriteFailures) -> sqlite3.Connection:
    """A file database's connection of its own for step transactions."""
    try:
        return connect_for_steps(path, synchronous)
    except sqlite3.Error as exc:
        raise failures.classify(exc) from exc


class SqliteStepTransaction:
    """A step's open `BEGIN IMMEDIATE` transaction on `conn` (see StepTransaction)."""

    def __init__(self, conn: sqlite3.Connection, where: str, release: Callable[[], None]) -> None:
        self._conn = conn
        self._where = where
        self._release: Callable[[], None] | None = release

    @property
    def connection(self) -> sqlite3.Connection:
        """The sqlite3 connection the step's function writes through."""
        return self._conn

    def state(self) -> Literal["open", "aborted", "ended"]:
        """SQLite keeps a transaction open after a failed statement: "open" or "ended"."""
        return "open" if self._conn.in_transaction else "ended"

    def interrupt(self) -> None:
        """sqlite3_interrupt: the running statement fails with "interrupted" (any thread)."""
        try:
            self._conn.interrupt()
        except sqlite3.ProgrammingError:
            pass  # closed

    async def commit(
        self, lease: Lease, step: StepRecord, marks: Sequence[StepRecord] = ()
    ) -> None:
        """Write the journal entries fenced by `lease` and commit them with the user's rows."""
        conn = self._conn
        try:
            for mark in marks:
                run(conn, journal.upsert_step(lease, mark)())
            run(conn, journal.record_step(lease, step)())
            conn.execute("COMMIT")
        except LeaseLost:
            self._rollback()
            raise
        except (sqlite3.Error, UnicodeError, ValueError, OverflowError) as exc:
            self._rollback()
            raise classify(self._where, exc) from exc
        except BaseException:
            self._rollback()
            raise
        finally:
            self._free()

    async def rollback(self) -> None:
        """Undo the transaction, if still open, and free the store's write path."""
        try:
            self._rollback()
        finally:
            self._free()

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolled it back itself (an I/O error): nothing is left of it

    def _free(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()
