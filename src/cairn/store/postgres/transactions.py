"""PostgreSQL transactions of `@cairn.transaction` steps, off the group-commit path.

An async step gets a connection of the store's pool; a plain (sync) step, run in a thread,
gets a blocking psycopg connection from a small pool opened on first use. Either way the
step's journal entry is inserted in the user's transaction, fenced on the run row (FOR KEY
SHARE, which a takeover's FOR UPDATE waits for), and committed with the user's rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Generic, Literal, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from cairn.errors import StoreUnavailable
from cairn.store.postgres import connections, dialect, sessions
from cairn.store.postgres.connections import Conn, Pool, is_lost, store_error
from cairn.store.programs import journal
from cairn.store.programs.base import Program
from cairn.store.records import Lease, StepRecord

SyncConn = psycopg.Connection[Any]
SyncPool = ConnectionPool[SyncConn]
# How long a cancel of a statement waits for the server (in a thread of its own).
CANCEL_WAIT = 2.0
# The transaction's id, and its session named for the worker while it lasts (see sessions).
_XID = "SELECT txid_current_if_assigned()::text, set_config('application_name', %s, true)"


def _entries(lease: Lease, step: StepRecord, marks: Sequence[StepRecord]) -> list[Program[None]]:
    return [
        *(journal.upsert_step(lease, mark)() for mark in marks),
        journal.record_step(lease, step)(),
    ]


def _state(status: TransactionStatus) -> Literal["open", "aborted", "ended"]:
    if status == TransactionStatus.INTRANS:
        return "open"
    return "aborted" if status == TransactionStatus.INERROR else "ended"


def _unknown(where: str, exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"database {where}: connection lost at COMMIT of a transaction step; whether it "
        "committed is unknown (the journal says)",
        unknown=True,
    )


def _begin(timeout: float | None) -> str:
    """BEGIN, with the step's time limit on each statement (and each wait for a lock)."""
    if timeout is None:
        return "BEGIN"
    ms = max(1, round(timeout * 1000))
    return f"BEGIN; SET LOCAL statement_timeout = {ms}; SET LOCAL lock_timeout = {ms}"


def _begin_failed(where: str, exc: psycopg.Error) -> Exception:
    """A lost connection at BEGIN is unavailable (the caller tries again); else classified."""
    if is_lost(None, exc):
        return StoreUnavailable(f"database {where}: {connections.first_line(exc)}")
    return store_error(where, exc)


C = TypeVar("C", Conn, SyncConn)
P = TypeVar("P", Pool, SyncPool)


class _Held(Generic[P, C]):
    """A connection held from `pool` for one step's transaction, until it ends."""

    def __init__(self, pool: P, conn: C, where: str) -> None:
        self._pool: P = pool
        self._conn: C | None = conn
        self._where = where

    @property
    def connection(self) -> C:
        """The psycopg connection (async or blocking), inside the transaction."""
        if self._conn is None:
            raise RuntimeError("the transaction of this step has ended")
        return self._conn

    def state(self) -> Literal["open", "aborted", "ended"]:
        """From the connection's transaction status."""
        return _state(self.connection.info.transaction_status)

    def interrupt(self) -> None:
        """Ask the server to cancel the statement running on the connection.

        Called in a thread of its own: it connects to the server and waits for it, at most
        CANCEL_WAIT. Not `cancel()`, which holds the GIL while it waits: a silent server
        froze the whole process with it.
        """
        conn = self._conn
        if conn is None or conn.closed:
            return
        try:
            if isinstance(conn, psycopg.AsyncConnection):
                asyncio.run(conn.cancel_safe(timeout=CANCEL_WAIT))  # this thread's own loop
            else:
                conn.cancel_safe(timeout=CANCEL_WAIT)
        except psycopg.Error:
            pass  # the connection is gone, or the server did not answer in time


class PgStepTransaction(_Held[Pool, Conn]):
    """An async step's transaction on a connection of the store's pool."""

    async def commit(
        self, lease: Lease, step: StepRecord, marks: Sequence[StepRecord] = ()
    ) -> None:
        """Insert the entries fenced by `lease` and COMMIT (see StepTransaction.commit)."""
        conn = self.connection
        try:
            try:
                for program in _entries(lease, step, marks):
                    request = next(program)
                    try:
                        while True:
                            cursors = await connections.send_all(conn, request)
                            request = program.send(await connections.results(request, cursors))
                    except StopIteration:
                        pass
                await conn.execute(_XID, (sessions.worker_name(lease.owner),))
            except BaseException as exc:
                await connections.rollback(conn)
                if isinstance(exc, psycopg.Error):
                    raise store_error(self._where, exc) from exc
                raise
            try:
                await conn.execute("COMMIT")
            except psycopg.Error as exc:
                if is_lost(conn, exc):
                    raise _unknown(self._where, exc) from exc
                await connections.rollback(conn)
                raise store_error(self._where, exc) from exc
        finally:
            await self._give_back()

    async def rollback(self) -> None:
        """Undo the transaction, if still open, and return the connection to the pool."""
        if self._conn is not None:
            try:
                await connections.rollback(self._conn)
            finally:
                await self._give_back()

    async def _give_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._pool.putconn(conn)


async def begin(pool: Pool, where: str, timeout: float | None = None) -> PgStepTransaction:
    """BEGIN on a pooled connection (StoreUnavailable if the database is away)."""
    try:
        conn = await connections.take(pool, 30.0)
    except Exception as exc:
        raise StoreUnavailable(
            f"database {where}: no connection for a transaction step: {exc}"
        ) from exc
    try:
        await conn.execute(_begin(timeout))
    except BaseException as exc:  # a cancellation too: the connection goes back
        await pool.putconn(conn)
        if isinstance(exc, psycopg.Error):
            raise _begin_failed(where, exc) from exc
        raise
    return PgStepTransaction(pool, conn, where)


class PgSyncStepTransaction(_Held[SyncPool, SyncConn]):
    """A sync step's transaction on a blocking connection; each call runs in a thread."""

    async def commit(
        self, lease: Lease, step: StepRecord, marks: Sequence[StepRecord] = ()
    ) -> None:
        """Insert the entries fenced by `lease` and COMMIT, in a thread."""
        await asyncio.to_thread(self._commit, lease, step, marks)

    def _commit(self, lease: Lease, step: StepRecord, marks: Sequence[StepRecord]) -> None:
        conn = self.connection
        try:
            try:
                for program in _entries(lease, step, marks):
                    _drive(conn, program)
                conn.execute(_XID, (sessions.worker_name(lease.owner),))
            except BaseException as exc:
                _rollback(conn)
                if isinstance(exc, psycopg.Error):
                    raise store_error(self._where, exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                if is_lost(None, exc) or conn.broken:
                    raise _unknown(self._where, exc) from exc
                _rollback(conn)
                raise store_error(self._where, exc) from exc
        finally:
            self._give_back()

    async def rollback(self) -> None:
        """Undo the transaction, if still open, and return the connection to its pool."""
        await asyncio.to_thread(self._rollback_and_give_back)

    def _rollback_and_give_back(self) -> None:
        if self._conn is not None:
            try:
                _rollback(self._conn)
            finally:
                self._give_back()

    def _give_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.putconn(conn)


def open_sync_pool(conninfo: str, max_size: int, idle_timeout: float | None) -> SyncPool:
    """The blocking connections of sync transaction steps (none kept open when idle long).

    Each sets `idle_timeout` (see sessions) when it connects.
    """
    pool: SyncPool = ConnectionPool(
        conninfo,
        min_size=0,
        max_size=max_size,
        kwargs={"autocommit": True},
        configure=lambda conn: sessions.configure_sync(conn, idle_timeout),
        open=False,
        name="cairn-steps",
    )
    pool.open(wait=False)
    return pool


def begin_sync(pool: SyncPool, where: str, timeout: float | None = None) -> PgSyncStepTransaction:
    """BEGIN on a blocking connection (call it in a thread)."""
    try:
        conn = pool.getconn(timeout=30.0)
    except Exception as exc:
        raise StoreUnavailable(
            f"database {where}: no connection for a transaction step: {exc}"
        ) from exc
    try:
        conn.execute(_begin(timeout))
    except psycopg.Error as exc:
        pool.putconn(conn)
        raise _begin_failed(where, exc) from exc
    return PgSyncStepTransaction(pool, conn, where)


def _drive(conn: SyncConn, program: Program[None]) -> None:
    """Run a shared program's statements on a blocking connection."""
    try:
        statement = next(program)
        while True:
            cursor = None
            for text, params in dialect.program_statements(
                statement.text, statement.params, lock=statement.lock
            ):
                cursor = conn.execute(text, params)
            assert cursor is not None
            if statement.fetch == "count":
                answer: Any = cursor.rowcount
            elif statement.fetch == "one":
                answer = cursor.fetchone() if cursor.description is not None else None
            else:
                answer = cursor.fetchall() if cursor.description is not None else []
            statement = program.send(answer)
    except StopIteration:
        return


def _rollback(conn: SyncConn) -> None:
    if conn.broken or conn.closed:
        return
    try:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
    except psycopg.Error:
        pass  # a broken connection is discarded when it goes back to the pool
