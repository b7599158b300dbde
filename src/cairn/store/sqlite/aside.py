"""Long reads on a connection of their own, in a thread: a scan that leaves the loop be.

The store's own reads run on the event loop's thread (a short read costs less than a trip
to a thread and back); a scan of every stored value (a blob sweep) would hold up every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import TypeVar

from cairn.store.programs.base import Program
from cairn.store.sqlite.connections import classify, connect, run

T = TypeVar("T")


async def read_aside(path: str, program: Program[T]) -> T:
    """Run a read-only program on a connection of its own, in a thread, in one snapshot.

    For long scans (see SqliteStore.read_aside): the event loop goes on meanwhile. A
    cancelled caller interrupts the scan, whose thread then closes the connection.
    """
    try:
        conn = connect(path, busy_ms=30_000)
    except sqlite3.Error as exc:
        raise classify(repr(path), exc) from exc

    def snapshot() -> T:
        try:
            conn.execute("BEGIN")  # one read transaction: every statement sees one state
            try:
                return run(conn, program)
            finally:
                conn.execute("ROLLBACK")
        finally:
            conn.close()

    try:
        return await asyncio.to_thread(snapshot)
    except asyncio.CancelledError:
        with contextlib.suppress(sqlite3.ProgrammingError):  # the thread closed it already
            conn.interrupt()
        raise
    except (sqlite3.Error, UnicodeError, ValueError) as exc:
        raise classify(repr(path), exc) from exc
