"""An orphan claim racing its owner's heartbeat: two connections, a lock held by the test.

The promise (core/tenure.py): once a heartbeat has committed, the owner's fence check
tells the truth, and nothing takes the run from under a check that passed. So a claim
that judged the owner dead must either commit before the heartbeat does (and the check
sees the run gone) or see the heartbeat and leave the run alone.

On PostgreSQL the test holds a lock the claim needs (its queue's row, taken after it has
read its candidates) or the owner's heartbeat itself uncommitted, and lets the other side
go meanwhile. On SQLite a held write transaction makes both wait; the order they then
take is SQLite's, and the same promise is checked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cairn.store import Store
from cairn.store.programs import claims, queues
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import Beat, QueueRecord
from cairn.store.sqlite.connections import db_now

from .kit import LEASE, T0, OpenStore, age_heartbeat, execute, is_sqlite, run_record, worker_record
from .test_prune_races import held

# How the owner came to look dead, and so which claim judges it.
#   late: its heartbeat is older than its lease (a claimer entitled to judge: stale=True);
#   expired: a neighbour marked it dead (any claimer);
#   removed: it has no worker row at all (any claimer).
OWNERS = ["late", "expired", "removed"]


async def orphan_of(store: Store, url: str, how: str) -> None:
    """Run "r" RUNNING under owner "w0" (fence 1) on queue "q", w0 looking dead by `how`."""
    await store.write(queues.update_queue(QueueRecord("q"), now=T0))
    await store.write(worker_ops.register_worker(worker_record("w0")))
    await store.write(run_ops.create_run(run_record("r", status="RUNNING", owner="w0", queue="q")))
    if how == "late":
        age_heartbeat(url, "w0", LEASE + 5)
    elif how == "expired":
        age_heartbeat(url, "w0", 0)
    else:
        execute(url, "DELETE FROM workers WHERE worker_id = ?", ("w0",))


async def beat(owner: Store) -> Beat:
    """A heartbeat of w0 as its worker sends it: on the side channel's own connection."""
    channel = owner.side_channel()
    if channel is None:  # memory://: the heartbeat goes through the store
        return await owner.write(worker_ops.beat(worker_record("w0")))
    try:
        return await asyncio.to_thread(channel.beat, worker_record("w0"))
    finally:
        channel.close()


def lock_waiters(url: str) -> int:
    """Sessions of the test's database waiting for a lock (PostgreSQL)."""
    name = url.rsplit("/", 1)[1]
    sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = ? AND wait_event_type = 'Lock'"
    return int(execute(url, sql, (name,))[0][0])


async def settled(url: str, task: asyncio.Task[Any], waiters: int) -> None:
    """Return once `task` is done or `waiters` sessions wait for a lock."""
    if is_sqlite(url):
        # Its BEGIN IMMEDIATE waits for the held one whenever the task gets to run.
        await asyncio.wait({task}, timeout=0.2)
        return
    async with asyncio.timeout(10):
        while not task.done() and lock_waiters(url) < waiters:
            await asyncio.sleep(0.01)


async def holder(store: Store) -> tuple[str | None, int]:
    run = await store.read(run_ops.get_run("r"))
    assert run is not None
    return run.owner, run.fence


@pytest.mark.parametrize("how", OWNERS)
async def test_orphan_claim__a_heartbeat_committed_meanwhile_is_never_overtaken(
    store: Store, store_url: str, open_store_at: OpenStore, how: str
) -> None:
    # The claim has read w0's run as an orphan and waits for its queue's row (the test
    # holds it) when w0's heartbeat goes out. Whatever w0's fence check reads once that
    # heartbeat has committed must still be true once the claim is done.
    await orphan_of(store, store_url, how)
    owner = await open_store_at()
    with held(store_url) as queue_row:
        if not is_sqlite(store_url):
            queue_row.conn.execute("SELECT name FROM queues WHERE name = 'q' FOR UPDATE")
        claim = asyncio.create_task(store.write(claims.claim("w1", 10, now=T0, stale=True)))
        await settled(store_url, claim, 1)
        heartbeat = asyncio.create_task(beat(owner))
        await settled(store_url, heartbeat, 2)
        checked = await holder(owner) if heartbeat.done() else None
        queue_row.commit()
        await claim
        await heartbeat
    if checked is None:  # the heartbeat waited for the claim: the check comes after both
        checked = await holder(owner)

    assert await holder(store) == checked


@pytest.mark.parametrize("how", OWNERS)
async def test_orphan_claim__waits_for_a_heartbeat_under_way_and_leaves_the_run(
    store: Store, store_url: str, how: str
) -> None:
    # w0's heartbeat is written but not committed when the claim reads w0's run as an
    # orphan: the claim waits for it (or skips the run) and leaves the run to w0, alive.
    await orphan_of(store, store_url, how)
    with held(store_url) as heartbeat:
        if is_sqlite(store_url):  # what the store's own connections define
            heartbeat.conn.create_function("cairn_now", 0, db_now, deterministic=False)
        heartbeat.run(worker_ops.beat_at(worker_record("w0"), now=T0))
        claim = asyncio.create_task(store.write(claims.claim("w1", 10, now=T0, stale=True)))
        await settled(store_url, claim, 1)
        heartbeat.commit()
        claimed = await claim

    assert claimed.runs == []
    assert await holder(store) == ("w0", 1)
