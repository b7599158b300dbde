"""PostgreSQL only: connections that stop answering are noticed, checked and replaced.

A proxy hangs the connections open at a moment (no error, no reply, no reset) while new
ones pass: the store must notice the silence, ask the server about the backend, drop the
dead connection and do the work on a new one. A statement the server is still executing
is left alone, and a transaction the server holds open for a dead connection is ended.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from tests.chaos.proxy import FreezingProxy

from cairn.errors import StoreError
from cairn.store.postgres import stalls
from cairn.store.postgres.side_channel import PostgresSideChannel
from cairn.store.postgres.store import PostgresStore, conninfo
from cairn.store.programs import claims, workers
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs.base import Sql
from cairn.store.records import Beat
from cairn.store.waits import Waits

from .kit import LEASE, age_heartbeat, held, run_record, step_record, worker_record

WAIT = 30.0  # far longer than the stall checks below need


@pytest.fixture
def proxy(pg_url: str) -> Iterator[FreezingProxy]:
    target = psycopg.conninfo.conninfo_to_dict(pg_url)
    freezing = FreezingProxy((str(target["host"]), int(target["port"])))
    try:
        yield freezing
    finally:
        freezing.close()


@pytest.fixture
async def proxied(pg_url: str, proxy: FreezingProxy) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(proxy.url(pg_url.rsplit("/", 1)[1]), stalled_after=0.5, retry_for=20)
    await store.open()
    yield store
    proxy.thaw()  # let the connections it left behind close
    await store.close()


async def test_connections__every_one_asks_the_kernel_to_notice_a_dead_peer(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url + "?keepalives_idle=7")
    await store.open()
    try:
        async with store.pool.connection() as conn:
            params = conn.info.get_parameters()
    finally:
        await store.close()
    assert params["keepalives"] == "1"
    assert params["tcp_user_timeout"] == "10000"
    assert params["keepalives_idle"] == "7"  # the URL's own value wins
    assert params["connect_timeout"] == "10"


async def test_stalled__a_write_whose_reply_never_comes_is_done_on_a_new_connection(
    proxied: PostgresStore, proxy: FreezingProxy
) -> None:
    await proxied.write(workers.register_worker(worker_record("w1")))
    await proxied.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await proxied.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))
    assert proxy.freeze() > 0

    async with asyncio.timeout(WAIT):  # for ever, without the stall check
        await proxied.write(journal_ops.record_step(held("w1"), step_record("r1", 2)))
        journal = await proxied.read(journal_ops.load_journal("r1"))

    assert [step.seq for step in journal] == [1, 2]


async def test_stalled__reads_and_claims_go_on_after_the_freeze(
    proxied: PostgresStore, proxy: FreezingProxy
) -> None:
    await proxied.write(run_ops.create_run(run_record("r1")))
    assert proxy.freeze() > 0
    async with asyncio.timeout(WAIT):
        claimed = await proxied.write(claims.claim("w1", 5, now=time.time(), stale=False))
        run = await proxied.read(run_ops.get_run("r1"))
    assert [r.run_id for r in claimed.runs] == ["r1"]
    assert run is not None and run.owner == "w1"


def _sleep(seconds: float) -> Any:
    row = yield Sql("SELECT 'slept' FROM (SELECT pg_sleep(?)) AS s", (seconds,), "one")
    return row[0]


async def test_stalled__a_statement_the_server_still_executes_is_left_to_finish(
    pg_url: str,
) -> None:
    store = PostgresStore(pg_url, stalled_after=0.2)
    await store.open()
    try:
        async with asyncio.timeout(WAIT):
            assert await store.read(lambda: _sleep(1.0)) == "slept"
        assert store.health.trouble_at() == 0.0  # never dropped nor retried
    finally:
        await store.close()


async def test_stalled__a_transaction_left_open_by_a_dead_connection_is_ended(
    pg_url: str, proxy: FreezingProxy
) -> None:
    # A transaction whose COMMIT never reaches the server holds its locks until the server
    # notices its client is gone (hours, with default keepalives): the check ends it.
    database = pg_url.rsplit("/", 1)[1]
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as setup:
        await setup.execute("CREATE TABLE held (id int PRIMARY KEY, v int)")
        await setup.execute("INSERT INTO held VALUES (1, 1)")
    dying = await psycopg.AsyncConnection.connect(proxy.url(database), autocommit=True)
    await dying.execute("BEGIN")
    await dying.execute("UPDATE held SET v = 2 WHERE id = 1")  # a row lock
    proxy.freeze()
    waits = Waits()
    waits.begin(dying)
    watch = stalls.StallWatch(
        stalls.with_dead_peer_detection(pg_url),
        "test",
        waits,
        after=0.01,
        on_dropped=_nothing,
    )
    await asyncio.sleep(0.05)
    try:
        assert await watch.check() == 1
        async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as other:
            await other.execute("SET lock_timeout = '5s'")
            await other.execute("UPDATE held SET v = v + 10 WHERE id = 1")
            cursor = await other.execute("SELECT v FROM held WHERE id = 1")
            assert await cursor.fetchone() == (11,)  # the dead transaction was rolled back
    finally:
        proxy.thaw()
        await dying.close()


async def test_stalled__a_server_that_cannot_be_asked_is_named_in_one_line(
    pg_url: str,
    proxy: FreezingProxy,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Asking through a frozen network times out: TimeoutError's own text is empty, and
    # the line ended in ": ", naming nothing.
    monkeypatch.setattr(stalls, "_ASKING", 0.1)
    database = pg_url.rsplit("/", 1)[1]
    waiting = await psycopg.AsyncConnection.connect(proxy.url(database), autocommit=True)
    proxy.freeze(new=True)  # its server is out of reach, and so is a new connection to it
    waits = Waits()
    waits.begin(waiting)
    watch = stalls.StallWatch(proxy.url(database), "db", waits, after=0.01, on_dropped=_nothing)
    await asyncio.sleep(0.05)
    try:
        with caplog.at_level("WARNING", logger="cairn"):
            assert await watch.check() == 0
    finally:
        proxy.thaw()
        await waiting.close()
    assert [r.getMessage() for r in caplog.records if "cannot check" in r.getMessage()] == [
        "cairn: cannot check stalled connections to db: no answer within 0.1 s"
    ]


async def _nothing() -> None:
    pass


def test_heartbeat__a_beat_with_no_reply_fails_and_the_next_one_reconnects(
    pg_url: str, proxy: FreezingProxy
) -> None:
    database = pg_url.rsplit("/", 1)[1]
    url = stalls.with_dead_peer_detection(conninfo(proxy.url(database)))
    channel = PostgresSideChannel(url, where="test", deadline=0.5)
    outcomes: list[object] = []

    def beat() -> None:
        try:
            outcomes.append(channel.beat(worker_record("w1")))
        except StoreError as exc:
            outcomes.append(exc)

    try:
        beat()
        proxy.freeze()  # the beat's connection hangs: no error, no reply
        for _ in range(2):
            thread = threading.Thread(target=beat, daemon=True)
            thread.start()
            thread.join(WAIT)
            assert not thread.is_alive(), "a heartbeat waited for ever"
    finally:
        channel.close()
    first, frozen, fresh = outcomes
    assert isinstance(first, Beat) and isinstance(fresh, Beat)
    assert isinstance(frozen, StoreError)


def test_heartbeat__the_server_ends_a_beat_left_open(pg_url: str) -> None:
    # A beat whose process froze between two statements holds its worker's row, which a
    # claim of that worker's runs waits for: the server ends it within seconds.
    channel = PostgresSideChannel(pg_url, where="test")
    try:
        channel.beat(worker_record("w1"))
        conn = channel._conn
        assert conn is not None
        [setting] = conn.execute("SHOW idle_in_transaction_session_timeout").fetchall()
    finally:
        channel.close()
    assert setting == ("5s",)


async def test_stalled__a_claim_retried_after_the_freeze_judges_heartbeats_anew(
    pg_url: str, proxied: PostgresStore, proxy: FreezingProxy
) -> None:
    # A claim judged before the database went silent, and retried on a new connection
    # after, must not take a run because its owner's heartbeat is old: nobody's heartbeat
    # could land meanwhile. The judgement is asked as the claim's transaction starts.
    await proxied.write(workers.register_worker(worker_record("w2")))
    await proxied.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w2")))
    age_heartbeat(pg_url, "w2", 3 * LEASE)
    judged_at = time.monotonic()

    def stale() -> bool:  # as leases.may_judge_heartbeats: no trouble since then
        return proxied.health.trouble_at() < judged_at

    assert proxy.freeze() > 0
    async with asyncio.timeout(WAIT):
        claimed = await proxied.write(claims.claim("w1", 5, now=time.time(), stale=stale))
        run = await proxied.read(run_ops.get_run("r1"))
    assert proxied.health.trouble_at() > judged_at  # the frozen connection was replaced
    assert claimed.runs == []
    assert run is not None and (run.owner, run.fence) == ("w2", 1)
