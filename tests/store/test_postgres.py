"""PostgreSQL only: lost connections (a restart) are retried, then reported; bulk writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from cairn.errors import StoreError
from cairn.store import _sql
from cairn.store.postgres import PostgresStore

from .kit import T0, execute, run_record, step_record, worker_record

# Ends every session on one database but the caller's, as a server restart does.
TERMINATE = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = ? AND pid <> pg_backend_pid()"
)


def admin(pg_url: str) -> tuple[str, str]:
    """The maintenance database's URL and the test database's name."""
    base, database = pg_url.rsplit("/", 1)
    return f"{base}/postgres", database


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url, retry_for=10.0)
    await store.open()
    yield store
    await store.close()


async def test_writes_and_reads__survive_every_connection_being_killed(
    pg_store: PostgresStore, pg_url: str
) -> None:
    server, database = admin(pg_url)
    await pg_store.register_worker(worker_record("w1"))
    for i in range(20):
        await pg_store.create_run(run_record(f"r{i}", status="RUNNING", owner="w1"))
    killed = 0

    async def steps(i: int) -> None:
        for seq in range(1, 21):
            await pg_store.record_step("w1", step_record(f"r{i}", seq))
            await pg_store.get_run(f"r{i}")

    async def killer() -> None:
        nonlocal killed
        for _ in range(3):
            await asyncio.sleep(0.05)
            killed += (await asyncio.to_thread(execute, server, TERMINATE, (database,)))[0][0]

    await asyncio.gather(killer(), *(steps(i) for i in range(20)))
    await pg_store.heartbeat("w1", T0 + 1)

    assert killed > 0
    for i in range(20):
        assert [s.seq for s in await pg_store.load_journal(f"r{i}")] == list(range(1, 21))


async def test_writes__fail_with_store_error_once_the_server_stays_away(pg_url: str) -> None:
    server, database = admin(pg_url)
    store = PostgresStore(pg_url, retry_for=0.5)
    await store.open()
    try:
        execute(server, f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        execute(server, TERMINATE, (database,))

        with pytest.raises(StoreError, match=database):
            await store.create_run(run_record("r1"))
    finally:
        execute(server, f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        await store.close()


async def test_open__hot_statements_get_bulk_forms(pg_store: PostgresStore) -> None:
    # Without them every step of every run costs a statement of its own.
    assert set(pg_store._bulk) == {_sql.INSERT_RUN, _sql.INSERT_STEP_OWNED, _sql.FINISH_RUN}
