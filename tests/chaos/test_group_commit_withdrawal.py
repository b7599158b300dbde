"""PostgreSQL's group commit withdraws a queued write whose caller gave up (a FreezingProxy).

Both lanes of the writer hold a write sent on a frozen connection, so a third queues
behind them. Its caller is cancelled (the dashboard's deadline does that to its work):
the write is withdrawn, counted so in the caller's tally (store/write_tally.py: the 503
then says "nothing was changed"), and never lands once the connections thaw. A write
already sent when its caller gave up is not withdrawn: its tally says it may be made,
and it is. The SQLite side (a write still waiting for the lock) is in
tests/dashboard/test_deadlines.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tests.chaos.proxy import FreezingProxy

from cairn.store import open_store, write_tally
from cairn.store.postgres.store import PostgresStore
from cairn.store.programs import workers
from cairn.store.records import WorkerRecord

pytestmark = [pytest.mark.process, pytest.mark.timeout(120)]

WAIT = 20.0  # seconds, for anything the test waits for


def _worker(worker_id: str) -> WorkerRecord:
    now = time.time()
    return WorkerRecord(worker_id, "host", 1, now, now)


async def _until(what: str, ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not ready():
        assert time.monotonic() < deadline, f"no {what} within {WAIT}s"
        await asyncio.sleep(0.01)


async def _counted(work: Callable[[], Awaitable[Any]], tally: write_tally.Tally) -> Any:
    write_tally.TALLY.set(tally)  # in this task's own context
    return await work()


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
        tallies = {name: write_tally.Tally() for name in ("sent", "other", "queued")}
        tasks = {}
        for name, lane in (("sent", 0), ("other", 1)):
            tasks[name] = asyncio.create_task(_counted(lambda n=name: register(n), tallies[name]))
            await _until(
                f"write {name!r} on lane {lane}", lambda i=lane: not writer._locks[i].free()
            )
        tasks["queued"] = asyncio.create_task(
            _counted(lambda: register("queued"), tallies["queued"])
        )
        await _until("a queued write", lambda: bool(writer._queue))
        for name in ("queued", "sent"):  # their callers give up, the queued one's first
            tasks[name].cancel()
            with pytest.raises(asyncio.CancelledError):
                await tasks[name]
        queued, sent = tallies["queued"], tallies["sent"]
        assert (queued.asked, queued.withdrawn) == (1, 1), "the queued write was not withdrawn"
        assert (sent.asked, sent.withdrawn) == (1, 0), "a write already sent counted withdrawn"
        assert not writer._queue
        freezing.thaw()
        await asyncio.wait_for(tasks["other"], WAIT)
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
