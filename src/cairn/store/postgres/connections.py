"""Statements on pooled PostgreSQL connections, retried while the server is away.

Reads run statement by statement (`read`); a write that is not group-committed runs alone
in an explicit transaction (`run_alone`); concurrent reads of runs by id share a query
(`RunReader`). A lost connection (the server restarted) or a transient refusal (a
serialization failure, a deadlock, a lock timeout) is retried on a new connection for up
to `retry_for` seconds, then fails with StoreUnavailable naming the database. Errors are
classified once, here: values the server will always refuse are StoreRefused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool

from cairn.errors import StoreError, StoreRefused, StoreUnavailable
from cairn.store import write_tally
from cairn.store._health import StoreHealth
from cairn.store.postgres import dialect
from cairn.store.programs.base import Sql

T = TypeVar("T")
Conn = AsyncConnection[Any]
Pool = AsyncConnectionPool[Conn]


@dataclass(frozen=True, slots=True)
class Native:
    """A statement already in PostgreSQL form (`%s` placeholders), run as is."""

    text: str
    params: Sequence[Any] = ()
    fetch: Literal["count", "one", "all"] = "count"


Request = Sql | Native | list[Sql | Native]
Program = Generator[Request, Any, T]


@dataclass(frozen=True, slots=True)
class Db:
    """Where statements go (`where` in messages), retry time, and the outages' `health`."""

    pool: Pool
    where: str
    retry_for: float
    health: StoreHealth


class Disconnected(Exception):
    """The connection is gone; the work may be retried on a new one."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (driver messages run to several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_lost(conn: Conn | None, exc: BaseException) -> bool:
    """True when `exc` means the connection or server is gone, not that a statement failed."""
    if isinstance(exc, Disconnected):
        return True
    if conn is not None:
        return conn.broken or conn.closed
    return isinstance(exc, psycopg.OperationalError)


# SQLSTATE classes and codes worth another try: connections, transaction rollbacks
# (serialization failure, deadlock), resources, lock timeouts, cancelled statements,
# the server shutting down or starting, system errors.
_TRANSIENT = ("08", "40", "53", "55P03", "57014", "57P", "58")
# What the server will refuse every time: data exceptions (a value too long, a bad byte,
# NUL), integrity violations, program limits (an index row too big).
_REFUSED = ("22", "23", "54")


def is_transient(exc: BaseException) -> bool:
    """True if the statement failed for now (see _TRANSIENT), not for good."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate.startswith(_TRANSIENT)


def store_error(where: str, exc: BaseException) -> StoreError:
    """The StoreError for a driver error, naming the database, chained to it.

    StoreUnavailable for what another try may not meet, StoreRefused for values the
    server (or psycopg, before sending: NUL bytes, unencodable strings) always refuses.
    """
    message = f"database {where}: {first_line(exc)}"
    sqlstate = getattr(exc, "sqlstate", None) or ""
    error: StoreError
    if isinstance(exc, Disconnected) or is_transient(exc):
        error = StoreUnavailable(message)
    elif sqlstate.startswith(_REFUSED) or isinstance(exc, UnicodeError):
        error = StoreRefused(message)
    elif not sqlstate and isinstance(exc, psycopg.DataError | psycopg.IntegrityError):
        error = StoreRefused(message)  # refused by psycopg itself
    else:
        error = StoreError(message)
    error.__cause__ = exc
    return error


def dedup_clash(exc: StoreError) -> bool:
    """True if `exc` is an insert refused by the unique index on active dedup keys."""
    cause = exc.__cause__
    return (
        isinstance(cause, psycopg.errors.UniqueViolation)
        and cause.diag.constraint_name == "runs_dedup"
    )


def payload(wakes: Sequence[float]) -> str:
    """A NOTIFY payload: wake times, "0" meaning now (kept well under the 8 kB limit)."""
    return " ".join(f"{w:.3f}" for w in sorted(set(wakes))[:500])


async def retrying(db: Db, work: Callable[[Conn], Awaitable[T]], *, within: float = -1) -> T:
    """Run `work` on a pooled connection, again while the server is away or says "later".

    `within` (seconds, default `db.retry_for`) bounds the retries; then StoreUnavailable.
    """
    loop = asyncio.get_running_loop()
    retry_for = db.retry_for if within < 0 else within
    started = loop.time()
    deadline = started + retry_for
    delay = 0.01
    while True:
        conn: Conn | None = None
        try:
            async with _pooled(db.pool, max(0.1, deadline - loop.time())) as conn:
                waiting = db.health.waits.begin(conn)  # see stalls
                try:
                    done = await work(conn)
                finally:
                    db.health.waits.end(waiting)
            if delay > 0.01:  # it took retries: tell the health of the wait
                db.health.waited(loop.time() - started)
            return done
        except (psycopg.Error, Disconnected, UnicodeError) as exc:
            if not (is_lost(conn, exc) or is_transient(exc)):
                raise store_error(db.where, exc) from exc
            db.health.trouble()
            if loop.time() >= deadline:
                cause = exc.__cause__ if isinstance(exc, Disconnected) else exc
                raise StoreUnavailable(
                    f"database {db.where}: unreachable for {retry_for:g}s "
                    f"({first_line(cause or exc)})"
                ) from exc
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


@contextlib.asynccontextmanager
async def _pooled(pool: Pool, timeout: float) -> AsyncIterator[Conn]:
    """A connection from `pool`, like `pool.connection()` but never losing a cancellation.

    The pool waits with asyncio.wait_for, which on Python 3.11 can swallow a cancellation
    that arrives as a connection frees up (the engine's loops then never stop). Waiting
    in a shielded task of its own keeps the cancellation with the caller; a connection
    that comes too late goes back to the pool.
    """
    conn = await take(pool, timeout)
    try:
        yield conn
    finally:
        await pool.putconn(conn)


async def take(pool: Pool, timeout: float) -> Conn:
    """A connection from `pool` (give it back with `putconn`); see `_pooled` on cancelling."""
    getting = asyncio.ensure_future(pool.getconn(timeout=timeout))
    try:
        return await asyncio.shield(getting)  # a cancellation stops here, not in the pool
    except asyncio.CancelledError:
        _background.add(getting)
        getting.add_done_callback(_background.discard)
        getting.add_done_callback(lambda done: _give_back(pool, done))
        raise


def _give_back(pool: Pool, getting: asyncio.Future[Conn]) -> None:
    if not getting.cancelled() and getting.exception() is None:
        task = asyncio.ensure_future(pool.putconn(getting.result()))
        _background.add(task)
        task.add_done_callback(_background.discard)


# Connections still being taken for a caller that was cancelled, and given back.
_background: set[asyncio.Future[Any]] = set()


async def settle(within: float) -> None:
    """Wait up to `within` seconds for the connections being taken or given back above.

    After its pool closed, each ends (PoolClosed) a moment later: waited here, none is
    left for asyncio.run to report as an exception at exit.
    """
    pending = [future for future in _background if not future.done()]
    if pending:
        await asyncio.wait(pending, timeout=within)
    for future in pending:
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: a closed pool's refusal is expected


async def read(db: Db, program: Program[T]) -> T:
    """Run a read-only program; each statement is retried on a new connection if lost."""
    try:
        request = next(program)
        while True:

            async def answer(conn: Conn, request: Request = request) -> Any:
                return await _answer(conn, request)

            request = program.send(await retrying(db, answer))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_alone(db: Db, make: Callable[[], Program[T]], wake: float | None) -> T:
    """Run the write program `make()` builds alone in an explicit transaction.

    A connection lost before COMMIT was sent (the server restarted) is replaced and the
    transaction run again with a fresh program, for up to `retry_for` seconds: the server
    rolled the lost one back. If the reply to COMMIT itself is lost, the server is asked
    how it ended: committed, its outcome stands; aborted, it is run again; else (it cannot
    be asked, say) StoreUnavailable with `unknown` set.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + db.retry_for
    committing: list[bool] = []  # COMMIT was sent: a writer giving up cannot withdraw it
    while True:
        left = max(0.1, deadline - loop.time())
        try:
            return await retrying(
                db, lambda conn: _transact(conn, make(), wake, committing), within=left
            )
        except asyncio.CancelledError:
            if not committing:
                write_tally.withdrawn()  # never committed: the server rolls it back
            raise
        except _CommitUnknown as unknown:
            # A lost connection, like any other (`retrying`): trouble, though it committed.
            db.health.trouble()
            ended = await _ended(db, max(0.1, deadline - loop.time()), unknown.xid)
            if ended == "committed":
                return unknown.outcome  # type: ignore[no-any-return]
            if ended != "aborted" or loop.time() >= deadline:
                raise StoreUnavailable(
                    f"database {db.where}: connection lost at COMMIT; the transaction's fate "
                    f"is unknown ({ended})",
                    unknown=True,
                ) from unknown.__cause__


async def _ended(db: Db, retry_for: float, xid: str) -> str:
    """How `xid` ended: "committed", "aborted", "in progress", "forgotten" or "not asked"."""

    async def status(conn: Conn) -> str:
        row = await (await conn.execute("SELECT txid_status(%s::bigint)", (xid,))).fetchone()
        return "forgotten" if row is None or row[0] is None else str(row[0])

    loop = asyncio.get_running_loop()
    deadline = loop.time() + retry_for
    while True:
        try:
            ended = await retrying(db, status, within=retry_for)
        except StoreUnavailable:  # the server cannot be reached: it may have committed
            return "not asked"
        # A backend whose client vanished finishes (or aborts) its COMMIT on its own.
        if ended != "in progress" or loop.time() >= deadline:
            return ended
        await asyncio.sleep(0.01)


_XID = "SELECT txid_current_if_assigned()::text"
_XID_AND_NOTIFY = "SELECT txid_current_if_assigned()::text, pg_notify('cairn_runs', %s)"


class _CommitUnknown(Exception):
    def __init__(self, xid: str, outcome: Any) -> None:
        super().__init__(xid)
        self.xid = xid
        self.outcome = outcome


async def _transact(
    conn: Conn, program: Program[T], wake: float | None, committing: list[bool]
) -> T:
    try:
        await conn.execute("BEGIN")  # also proves the pooled connection is alive
    except psycopg.Error as exc:
        if is_lost(conn, exc):
            raise Disconnected() from exc
        raise
    try:
        outcome: T
        try:
            request = next(program)
            while True:
                request = program.send(await _answer(conn, request))
        except StopIteration as done:
            outcome = done.value
        if wake is None:
            cursor = await conn.execute(_XID)
        else:
            cursor = await conn.execute(_XID_AND_NOTIFY, (payload([wake]),))
        row = await cursor.fetchone()
    except BaseException as exc:
        await rollback(conn)
        if isinstance(exc, psycopg.Error) and is_lost(conn, exc):
            raise Disconnected() from exc  # rolled back by the server: `retrying` runs it anew
        raise
    xid = None if row is None else row[0]
    committing.append(True)
    try:
        await conn.execute("COMMIT")
    except psycopg.Error as exc:
        if not is_lost(conn, exc):
            raise
        if xid is None:
            return outcome  # nothing was written, so nothing was lost
        raise _CommitUnknown(xid, outcome) from exc
    return outcome


async def _send(conn: Conn, statement: Sql | Native) -> AsyncCursor[Any]:
    """Execute (or, in pipeline mode, queue) one statement; the cursor of its result."""
    if isinstance(statement, Native):
        return await conn.execute(statement.text, statement.params)
    cursor = None
    for text, params in dialect.program_statements(
        statement.text, statement.params, lock=statement.lock
    ):
        cursor = await conn.execute(text, params)
    assert cursor is not None
    return cursor


def statement_count(request: Request) -> int:
    """How many statements `request` sends (a program's may carry a lock first)."""
    statements = request if isinstance(request, list) else [request]
    return sum(
        1
        if isinstance(s, Native)
        else len(dialect.program_statements(s.text, s.params, lock=s.lock))
        for s in statements
    )


async def send_all(conn: Conn, request: Request) -> list[AsyncCursor[Any]]:
    """Send a request's statements on `conn`; their cursors, to read with `results`."""
    statements = request if isinstance(request, list) else [request]
    return [await _send(conn, statement) for statement in statements]


async def results(request: Request, cursors: list[AsyncCursor[Any]]) -> Any:
    """What the program expects back from the cursors of `send_all`."""
    statements = request if isinstance(request, list) else [request]
    results = [
        await _result(cursor, statement.fetch)
        for cursor, statement in zip(cursors, statements, strict=True)
    ]
    return results if isinstance(request, list) else results[0]


async def _answer(conn: Conn, request: Request) -> Any:
    """Run a request's statements on `conn` and return what the program expects."""
    return await results(request, await send_all(conn, request))


async def _result(cursor: AsyncCursor[Any], fetch: str) -> Any:
    if fetch == "count":
        return cursor.rowcount
    if cursor.description is None:  # no rows to fetch (an UPDATE), as sqlite3 answers
        return None if fetch == "one" else []
    if fetch == "one":
        return await cursor.fetchone()
    return await cursor.fetchall()


async def rollback(conn: Conn) -> None:
    """Roll back an open transaction on `conn`, if it can still be reached."""
    if conn.broken or conn.closed:
        return
    try:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
    except psycopg.Error:
        pass  # a broken connection is discarded when it goes back to the pool
