"""A plain (sync) @cairn.transaction step blocked in the database: its timeout and a cancel.

On PostgreSQL the step waits for a row lock another connection holds; on SQLite (where
the step holds the write lock from its start, so no statement of it waits for one) it
runs a statement that never ends. Either way the blocked thread must return: the step's
timeout fails the attempt in about that time, and a cancel of the run reaches it (on
PostgreSQL).
Times are asserted generously, never as benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from tests.store.kit import execute

import cairn
from cairn.authoring.transaction import make_transaction

from .kit import WAIT, Kit

ENDLESS = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c"
LOCKED = "SELECT item FROM ledger WHERE item = 'held' FOR UPDATE"


@contextlib.contextmanager
def blocking_statement(kit: Kit) -> Iterator[str]:
    """A statement that blocks on this store until the block ends (see the module)."""
    execute(kit.url, "CREATE TABLE IF NOT EXISTS ledger (item TEXT)")
    if kit.url.startswith("sqlite"):
        yield ENDLESS
        return
    import psycopg

    execute(kit.url, "INSERT INTO ledger (item) VALUES ('held')")
    with psycopg.connect(kit.url) as holder:  # a transaction of its own: the row lock
        holder.execute(LOCKED)
        try:
            yield LOCKED
        finally:
            holder.rollback()


def _blocked_step(kit: Kit, sql: str, timeout: Any, entered: asyncio.Event) -> Any:
    loop = asyncio.get_running_loop()

    def book(conn: Any) -> str:
        conn.execute("INSERT INTO ledger (item) VALUES ('booked')")
        loop.call_soon_threadsafe(entered.set)
        conn.execute(sql).fetchall()
        return "unblocked"

    return make_transaction(book, "book", 1, timeout, kit.registry)


async def test_transaction_blocking__timeout_fails_a_blocked_sync_step(kit: Kit) -> None:
    entered = asyncio.Event()
    with blocking_statement(kit) as sql:
        book = _blocked_step(kit, sql, "2s", entered)

        @kit.workflow("txn.blocked.timeout")
        async def flow() -> str:
            try:
                return str(await book())
            except cairn.StepFailed as failed:
                return failed.error_type

        loop = asyncio.get_running_loop()
        async with kit.engine() as engine:
            started = loop.time()
            run = await engine.start(flow)
            outcome = await run.result(timeout=WAIT)
            took = loop.time() - started
    assert outcome == "cairn.errors.StepTimeout"
    assert took < 6.0  # about 2 s; the thread used to wait for the lock for ever
    assert execute(kit.url, "SELECT item FROM ledger WHERE item = 'booked'") == []


async def test_transaction_blocking__a_cancel_reaches_a_blocked_sync_step(pg_url: str) -> None:
    # PostgreSQL: on SQLite the step holds the process's write path, so the cancel itself
    # is written only when the step ends (its timeout bounds that; see transaction.md).
    kit = Kit(pg_url)
    entered = asyncio.Event()
    with blocking_statement(kit) as sql:
        book = _blocked_step(kit, sql, "1h", entered)

        @kit.workflow("txn.blocked.cancel")
        async def flow() -> str:
            return str(await book())

        loop = asyncio.get_running_loop()
        async with kit.engine() as engine:
            run = await engine.start(flow)
            await asyncio.wait_for(entered.wait(), WAIT)
            await asyncio.sleep(0.2)  # blocked in the statement by now
            asked = loop.time()
            await run.cancel()
            with pytest.raises(cairn.RunCancelled):
                await run.result(timeout=WAIT)
            took = loop.time() - asked
            attempts = await engine.control.attempts(run.run_id)
    assert took < 3.0  # not the hour of its timeout
    # Ended by the cancel, not failed and retried: one attempt, ended cancelled.
    assert [(a["key"], a["outcome"], a["retry_at"]) for a in attempts] == [
        ("book#1", "cancelled", None)
    ]
    assert execute(kit.url, "SELECT item FROM ledger WHERE item = 'booked'") == []


async def test_transaction_blocking__a_timeout_on_a_silent_server_stalls_only_its_thread(
    pg_url: str,
) -> None:
    """A step's timeout cancels its statement by asking the server on a new connection.

    psycopg's `cancel()` holds the GIL while it waits for the server's answer: when the
    server went silent, the whole process froze with it (every run, the heartbeat). The
    C-level guard ends the test process if it freezes, rather than hang for ever.
    """
    from tests.chaos.proxy import FreezingProxy

    proxy = FreezingProxy(("127.0.0.1", 5432))
    kit = Kit(proxy.url(pg_url.rsplit("/", 1)[1]))
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    def hang(conn: Any) -> str:
        loop.call_soon_threadsafe(entered.set)
        proxy.freeze(new=True)  # this statement, the cancel's connection, the store's
        conn.execute("SELECT pg_sleep(3)").fetchall()  # runs once the proxy thaws
        return "slept"

    step = make_transaction(hang, "hang", 1, "1s", kit.registry)

    @kit.workflow("txn.silent.timeout")
    async def flow() -> str:
        try:
            return str(await step())
        except cairn.StepFailed as failed:
            return failed.error_type

    faulthandler.dump_traceback_later(60, exit=True)
    try:
        async with kit.engine() as engine:
            run = await engine.start(flow)
            await asyncio.wait_for(entered.wait(), WAIT)
            ticks = [loop.time()]
            while ticks[-1] - ticks[0] < 4:  # the timeout and the cancel's wait, frozen
                await asyncio.sleep(0.05)
                ticks.append(loop.time())
            proxy.thaw()
            outcome = await run.result(timeout=WAIT)
    finally:
        faulthandler.cancel_dump_traceback_later()
        proxy.close()
    assert max(later - earlier for earlier, later in itertools.pairwise(ticks)) < 1.0
    assert outcome == "cairn.errors.StepTimeout"
