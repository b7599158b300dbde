"""The time limit of one `db.query`/`db.update` attempt, enforced by the database itself.

A statement blocked on a lock or running long holds the step's thread, which no Python
timeout can take back; so each database is told the limit in its own terms, and the
statement fails there when it passes:

- PostgreSQL: `SET LOCAL statement_timeout` and `lock_timeout` (for the transaction only).
- MariaDB: the session's `max_statement_time`; MySQL: `max_execution_time` (SELECTs only)
  and `innodb_lock_wait_timeout`, both put back after the statement.
- SQLite: the connection's busy timeout (waiting for another writer) and a progress
  handler that interrupts a statement past the deadline, both put back after.

A cancel of the run cancels the running statement too: PostgreSQL's cancel request,
SQLite's interrupt, MariaDB's and MySQL's `KILL QUERY` from a second connection.

A database whose answer never arrives (a frozen network path or proxy: the connection
stays open and silent) cannot enforce anything, so `hangs_up` closes the connection's
socket once the limit has passed by `GRACE`: the driver then fails at once, the
connection is dropped from the pool, and the step's thread is free again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from cairn.steps import calling

if TYPE_CHECKING:
    import sqlalchemy

__all__ = ["GRACE", "HangUp", "hangs_up", "limited"]

GRACE = 2.0
"""Seconds past an attempt's limit before its silent connection is hung up on."""

# SQLite's progress handler runs every this many virtual machine instructions.
_SQLITE_EVERY = 1000


@contextlib.contextmanager
def limited(
    connection: sqlalchemy.Connection, seconds: float, hang_up: HangUp | None = None
) -> Iterator[None]:
    """Run the block's statements (in `connection`'s open transaction) within `seconds`.

    A cancel of the run also hangs `hang_up` up `GRACE` seconds later, for a database
    that cannot hear the cancel (a frozen network path).
    """
    raw = connection.connection.driver_connection
    backend = connection.dialect.name
    with calling.cancel_stops(_stopper(connection, raw, backend, hang_up)):
        if backend == "postgresql":
            ms = max(1, round(seconds * 1000))
            connection.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
            connection.exec_driver_sql(f"SET LOCAL lock_timeout = {ms}")
            yield
        elif backend == "sqlite":
            with _sqlite(raw, seconds):
                yield
        elif backend in ("mysql", "mariadb"):
            with _mysql(connection, seconds):
                yield
        else:  # a dialect cairn knows no limit for: the statement runs unbounded
            yield


@contextlib.contextmanager
def _sqlite(raw: Any, seconds: float) -> Iterator[None]:
    deadline = time.monotonic() + seconds
    (busy,) = raw.execute("PRAGMA busy_timeout").fetchone()
    raw.execute(f"PRAGMA busy_timeout = {max(1, round(seconds * 1000))}")
    raw.set_progress_handler(lambda: time.monotonic() > deadline, _SQLITE_EVERY)
    try:
        yield
    finally:
        raw.set_progress_handler(None, _SQLITE_EVERY)
        raw.execute(f"PRAGMA busy_timeout = {int(busy)}")


@contextlib.contextmanager
def _mysql(connection: sqlalchemy.Connection, seconds: float) -> Iterator[None]:
    whole = max(1, math.ceil(seconds))  # innodb_lock_wait_timeout counts whole seconds
    if getattr(connection.dialect, "is_mariadb", False):
        names = ("max_statement_time", "innodb_lock_wait_timeout")
        values: tuple[Any, ...] = (f"{seconds:.6f}", whole)
    else:
        names = ("max_execution_time", "innodb_lock_wait_timeout")
        values = (max(1, round(seconds * 1000)), whole)
    sets = ", ".join(f"SESSION {n} = {v}" for n, v in zip(names, values, strict=True))
    connection.exec_driver_sql(f"SET {sets}")
    try:
        yield
    finally:
        # Back to the server's defaults: the connection returns to a shared pool.
        try:
            connection.exec_driver_sql("SET " + ", ".join(f"SESSION {n} = DEFAULT" for n in names))
        except Exception:  # a broken connection: never reused with the limits
            connection.invalidate()


def _stopper(
    connection: sqlalchemy.Connection, raw: Any, backend: str, hang_up: HangUp | None
) -> Callable[[], None]:
    """What a cancel of the run does: cancel the statement running on `raw` (from the loop)."""
    session: int | None = int(raw.thread_id()) if backend in ("mysql", "mariadb") else None

    def kill_query() -> None:
        # The blocked session cannot hear us: another connection asks the server.
        with connection.engine.connect() as other:
            other.exec_driver_sql(f"KILL QUERY {session}")

    def cancel() -> None:
        # psycopg's cancel() holds the GIL while it waits for the server, which froze
        # the whole process when the server did not answer; cancel_safe() does not.
        with contextlib.suppress(Exception):
            raw.cancel_safe(timeout=GRACE)

    def stop() -> None:
        if hang_up is not None:
            hang_up.soon(GRACE)
        if backend == "sqlite":
            raw.interrupt()  # thread-safe and immediate
        elif backend == "postgresql" and hasattr(raw, "cancel_safe"):
            # It connects to the server to ask: off the loop.
            asyncio.get_running_loop().run_in_executor(None, cancel)
        elif session is not None:
            asyncio.get_running_loop().run_in_executor(None, kill_query)

    return stop


class HangUp:
    """Shuts a connection's socket down at a deadline, unless the attempt ended first."""

    def __init__(self, sock: socket.socket | None, seconds: float) -> None:
        self.fired = False
        self._sock = sock
        self._lock = threading.Lock()
        self._done = sock is None
        self._at = time.monotonic() + seconds
        self._timer: threading.Timer | None = None
        self._arm(seconds)

    def soon(self, seconds: float) -> None:
        """Hang up within `seconds` from now, if not due sooner (a cancel of the run)."""
        with self._lock:
            if self._done or time.monotonic() + seconds >= self._at:
                return
            self._at = time.monotonic() + seconds
            if self._timer is not None:
                self._timer.cancel()
        self._arm(seconds)

    def close(self) -> None:
        """The attempt ended: never hang up now."""
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
        if self._sock is not None:
            self._sock.close()  # a copy: the connection keeps its own

    def _arm(self, seconds: float) -> None:
        if self._done:
            return
        timer = threading.Timer(seconds, self._fire)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._done or self._sock is None or time.monotonic() < self._at - 0.001:
                return
            self.fired = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def hangs_up(raw: Any, seconds: float) -> Iterator[HangUp]:
    """Shut `raw`'s socket down if the block still runs after `seconds` (a silent peer).

    The `HangUp` yielded says whether that happened (the block's error is then the
    hang-up's). A driver whose socket cannot be found is left alone.
    """
    hang_up = HangUp(_socket(raw), seconds)
    try:
        yield hang_up
    finally:
        hang_up.close()


def _socket(raw: Any) -> socket.socket | None:
    """A copy of the socket of `raw`'s connection (psycopg's or PyMySQL's), or None."""
    own = getattr(raw, "_sock", None)  # PyMySQL
    fileno = own.fileno if isinstance(own, socket.socket) else getattr(raw, "fileno", None)
    if fileno is None or not (own is not None or hasattr(raw, "pgconn")):
        return None  # SQLite (no socket), or a driver cairn does not know
    try:
        return socket.socket(fileno=os.dup(fileno()))
    except (OSError, ValueError, TypeError):
        return None
