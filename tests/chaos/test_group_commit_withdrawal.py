"""PostgreSQL's group commit withdraws a queued write whose caller gave up (a FreezingProxy).

Both lanes of the writer hold a write sent on a frozen connection, so a third queues
behind them. Its caller gives up (the dashboard's deadline, shortened, cuts it off): the
write is withdrawn, counted so in the caller's tally (store/write_tally.py), the 503's
message says "nothing was changed", and the write never lands once the connections
thaw. A write already sent when its deadline passed is not withdrawn: its 503 says it
may still be made, and it is. The SQLite side (a write still waiting for the lock) is in
tests/dashboard/test_deadlines.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from tests.chaos.proxy import FreezingProxy

from cairn.dashboard import target
from cairn.dashboard.api import replies
from cairn.store import open_store, write_tally
from cairn.store.postgres.store import PostgresStore
from cairn.store.programs import workers
from cairn.store.records import WorkerRecord

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

WAIT = 20.0  # seconds, for anything the test waits for
SHORT, LONG = 0.3, 3.0  # seconds: the deadlines of the requests cut off (target.DEADLINE: 30)
MAY = "a change asked for may still be made once it answers"


def _worker(worker_id: str) -> WorkerRecord:
    now = time.time()
    return WorkerRecord(worker_id, "host", 1, now, now)


async def _until(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not ready():
        assert time.monotonic() < deadline, f"no {what} within {WAIT}s"
        await asyncio.sleep(0.01)


async def test_frozen_lanes__a_queued_write_whose_caller_gave_up_is_withdrawn(
    pg_url: str, freezing: FreezingProxy
) -> None:
    store = open_store(freezing.url(pg_url.rsplit("/", 1)[1]))
    assert isinstance(store, PostgresStore)
    await store.open()
    try:
        writer = store._writer
        assert writer is not None

        def register(worker_id: str) -> Awaitable[None]:
            return store.write(workers.register_worker(_worker(worker_id)))

        # Two writes at once: each lane takes one, and keeps its connection.
        await asyncio.gather(register("warm-1"), register("warm-2"))
        assert freezing.freeze() > 0
        tallies = {name: write_tally.Tally() for name in ("sent", "queued")}

        def cut_off(name: str, deadline: float) -> Awaitable[None]:
            # As the dashboard and the MCP server run a request's work (dashboard/target.py).
            work = target.counted(lambda: register(name), tallies[name])
            return target.within(work, deadline, tallies[name])

        sent = asyncio.create_task(cut_off("sent", LONG))
        await _until("a write on lane 0", lambda: not writer._locks[0].free())
        other = asyncio.create_task(register("other"))
        await _until("a write on lane 1", lambda: not writer._locks[1].free())
        queued = asyncio.create_task(cut_off("queued", SHORT))
        await _until("a queued write", lambda: bool(writer._queue))
        # The queued write's deadline passes first, then that of the write on lane 0.
        for task, tail in ((queued, "nothing was changed"), (sent, MAY)):
            with pytest.raises(replies.UnansweredError) as answer:
                await task
            assert str(answer.value).endswith(f"try again shortly: {tail}")
        withdrawn, made = tallies["queued"], tallies["sent"]
        assert (withdrawn.asked, withdrawn.withdrawn) == (1, 1)
        assert (made.asked, made.withdrawn) == (1, 0)
        assert not writer._queue
        freezing.thaw()
        await asyncio.wait_for(other, WAIT)
        await register("after")  # behind anything still queued: it would have gone first
        found = {
            name: await store.read(workers.get_worker(name))
            for name in ("sent", "other", "queued", "after")
        }
        assert found["queued"] is None, "the withdrawn write landed once the database answered"
        assert found["other"] is not None and found["after"] is not None
        # Sent before its caller gave up: "may still be made", and it is, once thawed.
        deadline = time.monotonic() + WAIT
        while await store.read(workers.get_worker("sent")) is None:
            assert time.monotonic() < deadline, "the write sent before its caller gave up is lost"
            await asyncio.sleep(0.05)
    finally:
        freezing.thaw()
        await store.close()


async def test_no_connection_free__a_write_cut_off_before_it_had_one_is_withdrawn(
    pg_url: str,
) -> None:
    # A write that finds a lane free commits at once, on the lane's connection: the
    # first one waits for the pool to give it one. Every connection is taken here.
    store = PostgresStore(pg_url, max_connections=4)
    await store.open()
    taken = []
    try:
        while True:
            try:
                taken.append(await store.pool.getconn(timeout=0.5))
            except Exception:  # psycopg_pool.PoolTimeout: none is left
                break
        tally = write_tally.Tally()
        work = target.counted(
            lambda: store.write(workers.register_worker(_worker("waited"))), tally
        )
        with pytest.raises(replies.UnansweredError) as answer:
            await target.within(work, SHORT, tally)
        # Nothing was sent: it never had a connection to send it on.
        assert str(answer.value).endswith("try again shortly: nothing was changed")
        assert (tally.asked, tally.withdrawn) == (1, 1)
        for conn in taken:
            await store.pool.putconn(conn)
        taken = []
        await store.write(workers.register_worker(_worker("after")))
        assert await store.read(workers.get_worker("waited")) is None
        assert await store.read(workers.get_worker("after")) is not None
    finally:
        for conn in taken:
            await store.pool.putconn(conn)
        await store.close()


async def test_no_connection_free__a_write_a_lane_took_before_it_had_one_is_withdrawn(
    pg_url: str,
) -> None:
    # A lane takes what is queued into a batch, then waits for the pool to give it a
    # connection. A caller cut off meanwhile was told its change "may still be made", and
    # it was, once a connection came back, though nothing had been sent when it gave up.
    store = PostgresStore(pg_url, max_connections=4)
    await store.open()
    writer = store._writer
    assert writer is not None
    taken = []
    try:
        while True:
            try:
                taken.append(await store.pool.getconn(timeout=0.5))
            except Exception:  # psycopg_pool.PoolTimeout: none is left
                break

        def register(worker_id: str) -> Awaitable[None]:
            return store.write(workers.register_worker(_worker(worker_id)))

        # Two writes each hold a lane while they wait for a connection; a third queues.
        first = asyncio.create_task(register("first"))
        await _until("a write on lane 0", lambda: not writer._locks[0].free())
        second = asyncio.create_task(register("second"))
        await _until("a write on lane 1", lambda: not writer._locks[1].free())
        tally = write_tally.Tally()
        batched = asyncio.create_task(target.counted(lambda: register("batched"), tally))
        await _until("a queued write", lambda: bool(writer._queue))
        first.cancel()  # lane 0's own task takes the queued write, and waits for a connection
        with pytest.raises(asyncio.CancelledError):
            await first
        await _until("the queued write in lane 0's batch", lambda: not writer._queue)
        assert not writer._locks[0].free()
        batched.cancel()  # as target.within cuts work off at its deadline
        with pytest.raises(asyncio.CancelledError):
            await batched
        # Nothing was sent: the 503 may say "nothing was changed" (target._unchanged).
        assert (tally.asked, tally.withdrawn) == (1, 1)
        for conn in taken:
            await store.pool.putconn(conn)
        taken = []
        await asyncio.wait_for(second, WAIT)
        await register("after")  # lane 0 is free again only once its batch is over
        assert await store.read(workers.get_worker("batched")) is None, (
            "a write withdrawn before it was sent landed once a connection came"
        )
        assert await store.read(workers.get_worker("first")) is None
        assert await store.read(workers.get_worker("second")) is not None
        assert await store.read(workers.get_worker("after")) is not None
    finally:
        for conn in taken:
            await store.pool.putconn(conn)
        await store.close()
