"""PostgreSQL only: a lost session that still locks a run holds it for a bounded time.

A transaction step's session whose client vanished before COMMIT stays "idle in
transaction" on the server, holding FOR KEY SHARE on its run row; claims (FOR UPDATE SKIP
LOCKED) skip the run. Here a second raw connection, opened as cairn opens its sessions
(named for a worker, with cairn's idle_in_transaction_session_timeout), takes that lock
on a PENDING run and stays idle in its transaction, standing in for the lost session.
The run must show why it waits while held, and be executed once the server has ended
the session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from tests.engine.kit import Kit

import cairn
from cairn.runtime import blocking
from cairn.store.postgres import sessions
from cairn.store.postgres.store import PostgresStore

WAIT = 30.0
IDLE = 6.0  # seconds the server lets the stand-in session idle in its transaction


def _lost_session(store: PostgresStore, run_id: str) -> psycopg.Connection[Any]:
    """A session like a transaction step's, left idle in a transaction on the run's row."""
    conn = psycopg.connect(store._conninfo, autocommit=True)  # the store's own settings
    sessions.configure_sync(conn, store._idle_timeout)
    conn.execute("BEGIN")
    conn.execute("SELECT set_config('application_name', %s, true)", ("cairn:lost-worker",))
    conn.execute("SELECT 1 FROM runs WHERE run_id = %s FOR KEY SHARE", (run_id,))
    conn.execute("SELECT txid_current()")
    return conn


async def test_lost_session__the_run_says_who_holds_it_and_runs_once_the_server_ends_it(
    pg_url: str,
) -> None:
    kit = Kit(pg_url)
    calls: list[int] = []

    @kit.step("lost.work")
    def work() -> str:
        calls.append(1)
        return "done"

    @kit.workflow("lost.held")
    async def held() -> str:
        return await work()

    async with kit.engine(workers=0) as starter:
        run = await starter.start(held)
    store = PostgresStore(pg_url, idle_in_transaction_timeout=IDLE)
    lost = await asyncio.to_thread(_lost_session, store, run.run_id)
    try:
        async with kit.engine(store=store, workers=4) as engine:
            async with asyncio.timeout(WAIT):
                while True:
                    summary = await engine.control.describe(run.run_id)
                    if summary.waiting_for is not None:
                        break
                    assert summary.status is cairn.RunStatus.PENDING and not calls
                    await asyncio.sleep(0.05)
            assert summary.waiting_for.startswith(
                "locked by a session of worker lost-worker since "
            ), summary.waiting_for
            assert f"pid {lost.info.backend_pid}" in summary.waiting_for
            found = blocking.waiting(await engine.control.record(run.run_id), now=0)
            assert found is not None and found["kind"] == "locked"
            # No one ends the session but the server, after IDLE seconds.
            handle = await engine.get(run.run_id)
            assert await handle.result(timeout=WAIT) == "done"
        assert calls == [1]
        assert lost.closed or lost.broken or _ended(lost)
    finally:
        lost.close()


def _ended(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.Error:  # terminating connection due to idle-in-transaction timeout
        return True
    return False


@pytest.mark.parametrize("sync", [True, False])
async def test_sessions__transaction_steps_run_named_with_a_bounded_idle_time(
    pg_url: str, sync: bool
) -> None:
    kit = Kit(pg_url)
    query = (
        "SELECT current_setting('idle_in_transaction_session_timeout'), "
        "current_setting('application_name')"
    )

    if sync:

        @cairn.transaction  # type: ignore[misc]
        def settings(conn: Any) -> list[str]:
            return list(conn.execute(query).fetchone())

    else:

        @cairn.transaction  # type: ignore[misc]
        async def settings(conn: Any) -> list[str]:
            return list(await (await conn.execute(query)).fetchone())

    kit.registry.add_step(settings)

    @kit.workflow("sessions.settings")
    async def flow() -> list[str]:
        return await settings()

    async with kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == ["1min", "cairn"]
        async with engine.store.pool.connection() as conn:  # type: ignore[attr-defined]
            cursor = await conn.execute(query)
            assert await cursor.fetchone() == ("1min", "cairn")


def test_sessions__the_reason_is_the_one_blocking_recognises() -> None:
    assert sessions.LOCKED_BY == blocking.LOCKED_BY


async def test_sessions__a_timeout_the_url_sets_wins(pg_url: str) -> None:
    store = PostgresStore(pg_url + "?options=-c%20idle_in_transaction_session_timeout%3D5min")
    await store.open()
    try:
        async with store.pool.connection() as conn:
            cursor = await conn.execute("SHOW idle_in_transaction_session_timeout")
            assert await cursor.fetchone() == ("5min",)
    finally:
        await store.close()
