"""Workers: registration, heartbeats, handing runs back, and wake-ups for new work."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import replace

import pytest

from cairn.store import Store
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs import waits
from cairn.store.programs import workers as worker_ops
from cairn.store.records import WorkerRecord

from .kit import (
    LEASE,
    T0,
    OpenStore,
    age_heartbeat,
    execute,
    held,
    run_record,
    worker_record,
)


async def test_register_worker__inserts_then_refreshes_by_the_databases_clock(
    store: Store, store_url: str
) -> None:
    before = time.time()
    await store.write(worker_ops.register_worker(worker_record("w1", lease=30.0)))
    await store.write(worker_ops.register_worker(worker_record("w2")))
    age_heartbeat(store_url, "w1", 100)
    await store.write(worker_ops.register_worker(worker_record("w1", lease=20.0)))

    workers = {w.worker_id: w for w in await store.read(worker_ops.list_workers())}

    assert set(workers) == {"w1", "w2"}
    for worker in workers.values():  # the times are the database's, not the record's 0.0
        assert before - 5 <= worker.started_at <= time.time() + 5
        assert before - 5 <= worker.heartbeat_at <= time.time() + 5
    assert (workers["w1"].lease, workers["w2"].lease) == (20.0, LEASE)


async def test_register_worker__keeps_the_workflows_it_executes(store: Store) -> None:
    await store.write(
        worker_ops.register_worker(replace(worker_record("w1"), workflows='["a", "b"]'))
    )
    await store.write(
        worker_ops.register_worker(replace(worker_record("w1"), workflows='["a"]'))
    )  # redeployed
    await store.write(worker_ops.register_worker(worker_record("w2")))  # says nothing

    assert [w.workflows for w in await store.read(worker_ops.list_workers())] == ['["a"]', None]


async def test_beat__moves_the_heartbeat_and_says_what_the_worker_holds(
    store: Store, store_url: str
) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(worker_ops.register_worker(worker_record("w2")))
    await store.write(run_ops.create_run(run_record("mine", status="RUNNING", owner="w1")))
    await store.write(run_ops.create_run(run_record("theirs", status="RUNNING", owner="w2")))
    await store.write(run_ops.create_run(run_record("parked", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run("parked", held("w1"), "SLEEPING", wake_at=T0, waiting_for=None, now=T0)
    )
    age_heartbeat(store_url, "w1", 100)

    beat = await store.write(worker_ops.beat(worker_record("w1")))

    assert beat.owned == {"mine": 1}
    assert {w.worker_id for w in beat.workers} == {"w1", "w2"}
    [w1] = [w for w in await store.read(worker_ops.list_workers()) if w.worker_id == "w1"]
    assert abs(w1.heartbeat_at - time.time()) < 5


async def test_beat__a_worker_whose_row_was_removed_registers_again(store: Store) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(worker_ops.remove_worker("w1"))

    beat = await store.write(worker_ops.beat(worker_record("w1")))

    assert [w.worker_id for w in beat.workers] == ["w1"]


async def test_beat__once_stopped_writes_nothing(store: Store, store_url: str) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    age_heartbeat(store_url, "w1", 60.0)
    [before] = await store.read(worker_ops.list_workers())

    beat = await store.write(worker_ops.beat(worker_record("w1"), stopped=lambda: True))

    assert beat.owned == {}
    assert await store.read(worker_ops.list_workers()) == [before]  # not refreshed


async def test_beat__begun_before_the_stop_does_not_put_back_the_removed_row(
    store: Store,
) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(worker_ops.remove_worker("w1"))
    asked: list[bool] = []

    def stopped() -> bool:  # the stop came while the beat waited: after its first look
        asked.append(bool(asked))
        return asked[-1]

    await store.write(worker_ops.beat(worker_record("w1"), stopped=stopped))

    assert asked == [False, True]
    assert await store.read(worker_ops.list_workers()) == []


async def test_side_channel__a_beat_of_a_stopped_worker_writes_nothing(store: Store) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(worker_ops.remove_worker("w1"))
    channel = store.side_channel()
    if channel is None:
        pytest.skip(f"{store!r} has no side channel")
    try:
        await asyncio.to_thread(channel.beat, worker_record("w1"), (), lambda: True)
    finally:
        channel.close()

    assert await store.read(worker_ops.list_workers()) == []


async def test_side_channel__beats_from_a_thread_of_its_own(store: Store) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("mine", status="RUNNING", owner="w1")))
    channel = store.side_channel()
    if channel is None:
        pytest.skip(f"{store!r} has no side channel")
    try:
        beat = await asyncio.to_thread(channel.beat, worker_record("w1"))
    finally:
        channel.close()

    assert beat.owned == {"mine": 1}


@pytest.mark.parametrize("via", ["store", "side channel"])
async def test_beat__lets_go_of_the_runs_it_names_while_it_holds_them(
    open_store_at: OpenStore, via: str
) -> None:
    store, other = await open_store_at(), await open_store_at()
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(worker_ops.register_worker(worker_record("w2")))
    for run_id, owner in (("stuck", "w1"), ("moved", "w1"), ("theirs", "w2"), ("fine", "w1")):
        await store.write(run_ops.create_run(run_record(run_id, status="RUNNING", owner=owner)))
    await store.write(worker_ops.release_run("moved", held("w1")))
    await store.write(
        claim_ops.claim("w1", 10, now=T0, stale=False)
    )  # "moved": held again, fence 2
    let_go = [("stuck", 1), ("moved", 1), ("theirs", 1)]
    channel = store.side_channel() if via == "side channel" else None
    if via == "side channel" and channel is None:
        pytest.skip(f"{store!r} has no side channel")

    if channel is None:
        beat = await store.write(worker_ops.beat(worker_record("w1"), let_go))
    else:
        try:
            beat = await asyncio.to_thread(channel.beat, worker_record("w1"), let_go)
        finally:
            channel.close()

    assert beat.released == ("stuck",)  # not under another fence, nor another's
    assert beat.owned == {"fine": 1, "moved": 2}
    stuck = await other.read(run_ops.get_run("stuck"))
    assert stuck is not None and (stuck.status, stuck.owner) == ("PENDING", None)
    claimed = await other.write(claim_ops.claim("w2", 10, now=T0, stale=False))
    assert [(r.run_id, r.recoveries) for r in claimed.runs] == [("stuck", 0)]


async def test_expire_workers__makes_their_runs_recoverable_at_once(store: Store) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    before = await store.write(claim_ops.claim("w2", 10, now=T0, stale=True))

    await store.write(worker_ops.expire_workers(["w1"]))

    # Expired workers are dead for any claimer, one not yet judging heartbeats too.
    after = await store.write(claim_ops.claim("w2", 10, now=T0, stale=False))
    assert before.runs == []
    assert [(run.run_id, run.owner, run.recoveries) for run in after.runs] == [("r1", "w2", 1)]


async def test_remove_worker__hands_its_running_runs_back_as_pending(store: Store) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(run_ops.create_run(run_record("r2", status="RUNNING", owner="w2")))

    await store.write(worker_ops.remove_worker("w1"))

    r1, r2 = await store.read(run_ops.get_run("r1")), await store.read(run_ops.get_run("r2"))
    assert r1 is not None and r2 is not None
    assert (r1.status, r1.owner) == ("PENDING", None)
    assert (r2.status, r2.owner) == ("RUNNING", "w2")
    assert await store.read(worker_ops.list_workers()) == []


async def settle(store: Store) -> None:
    """Use up hints already pending (the first call starts listening, and reports it)."""
    loop = asyncio.get_running_loop()
    for _ in range(100):
        started = loop.time()
        await store.wait_for_work(0.05)
        if loop.time() - started >= 0.05:
            return
    raise AssertionError("wait_for_work never stays quiet")


async def woken_by(waiter: Store, write: Awaitable[object]) -> tuple[float, object]:
    """How long `waiter.wait_for_work(30)` waited for `write` (done after it began) to wake
    it, and what the write returned."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.create_task(waiter.wait_for_work(30))
    await asyncio.sleep(0)
    outcome = await write
    async with asyncio.timeout(10):
        await waiting
    return loop.time() - started, outcome


async def test_wait_for_work__times_out_when_nothing_happens(store: Store) -> None:
    loop = asyncio.get_running_loop()
    await settle(store)
    started = loop.time()

    await store.wait_for_work(0.2)

    assert loop.time() - started >= 0.19


async def test_wait_for_work__wakes_on_a_run_another_process_queues(
    open_store_at: OpenStore,
) -> None:
    worker, client = await open_store_at(), await open_store_at()
    await settle(worker)
    waited, _ = await woken_by(worker, client.write(run_ops.create_run(run_record("r1"))))
    assert waited < 10


async def test_wait_for_work__wakes_on_a_message_for_a_waiting_run(
    open_store_at: OpenStore,
) -> None:
    worker, client = await open_store_at(), await open_store_at()
    await worker.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await worker.write(
        run_ops.park_run("r1", held("w1"), "WAITING", wake_at=None, waiting_for="go", now=T0)
    )
    await settle(worker)
    message = waits.send_message("r1", "go", "1", idempotency_key=None, now=T0)
    await woken_by(worker, client.write(message))


async def test_wait_for_work__wakes_on_a_run_another_process_hands_back(
    open_store_at: OpenStore,
) -> None:
    # A stopping worker hands its runs back: the others must hear of it, not poll for it.
    worker, stopping = await open_store_at(), await open_store_at()
    await stopping.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await settle(worker)
    _, released = await woken_by(worker, stopping.write(worker_ops.release_run("r1", held("w1"))))
    assert released


async def test_counts__unfinished_runs_by_queue_and_status_and_live_workers(
    store: Store, store_url: str
) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    await store.write(worker_ops.register_worker(worker_record("gone")))
    age_heartbeat(store_url, "gone", LEASE + 5)
    await store.write(run_ops.create_run(run_record("p1")))
    await store.write(run_ops.create_run(run_record("p2", queue="mail")))
    await store.write(run_ops.create_run(run_record("p3", queue="mail")))
    await store.write(
        run_ops.create_run(run_record("r1", status="RUNNING", owner="w1", queue="mail"))
    )
    await store.write(run_ops.create_run(run_record("done", status="COMPLETED")))

    counts = await store.read(worker_ops.counts())

    assert counts.runs == {(None, "PENDING"): 1, ("mail", "PENDING"): 2, ("mail", "RUNNING"): 1}
    assert counts.live_workers == 1


async def test_known_workflows__of_workers_seen_within_the_window_gone_or_not(
    store: Store, store_url: str
) -> None:
    def worker(worker_id: str, *names: str) -> WorkerRecord:
        return replace(worker_record(worker_id), workflows=json.dumps(names))

    await store.write(worker_ops.register_worker(worker("live", "a", "b")))
    await store.write(worker_ops.register_worker(worker("stopped", "c")))
    await store.write(worker_ops.register_worker(worker("dead", "d")))
    await store.write(worker_ops.register_worker(worker("old", "e")))
    await store.write(
        worker_ops.register_worker(worker("runner", *()))
    )  # `cairn run`: takes nothing
    await store.write(worker_ops.remove_worker("stopped"))  # a clean stop deletes its row
    # Registered two hours ago, silent for the last one, then found dead: remembered as
    # of its last heartbeat.
    execute(store_url, "UPDATE known_workflows SET seen_at = seen_at - 7200 WHERE workflow = 'd'")
    age_heartbeat(store_url, "dead", 3600)
    await store.write(worker_ops.expire_workers(["dead"]))
    # Registered 10 days ago and silent since: its name is forgotten with a 7-day window.
    age_heartbeat(store_url, "old", 10 * 86400)
    execute(store_url, "UPDATE known_workflows SET seen_at = seen_at - ? WHERE workflow = 'e'",
            (10 * 86400,))  # fmt: skip

    assert await store.read(worker_ops.known_workflows(7 * 86400)) == {"a", "b", "c", "d"}
    assert await store.read(worker_ops.known_workflows(1800)) == {"a", "b", "c"}
    assert await store.read(worker_ops.known_workflows(30 * 86400)) == {"a", "b", "c", "d", "e"}
    await store.write(
        worker_ops.register_worker(worker("silent"))
    )  # an older worker that does not say
    await store.write(worker_ops.register_worker(replace(worker_record("quiet"), workflows=None)))
    assert await store.read(worker_ops.known_workflows(7 * 86400)) is None


async def test_known_workflows__a_name_registered_again_is_seen_at_the_later_time(
    store: Store, store_url: str
) -> None:
    first = replace(worker_record("w1"), workflows='["a"]')
    await store.write(worker_ops.register_worker(first))
    execute(store_url, "UPDATE known_workflows SET seen_at = seen_at - 5000")
    await store.write(worker_ops.remove_worker("w1"))  # stopped now: seen now
    assert await store.read(worker_ops.known_workflows(1000)) == {"a"}
    await store.write(worker_ops.register_worker(replace(worker_record("w2"), workflows='["a"]')))
    age_heartbeat(store_url, "w2", 9000)
    await store.write(
        worker_ops.expire_workers(["w2"])
    )  # its last heartbeat is older than what is known
    assert await store.read(worker_ops.known_workflows(1000)) == {"a"}


async def test_expire_workers__keeps_the_last_heartbeat_of_a_dead_worker(
    store: Store, store_url: str
) -> None:
    await store.write(worker_ops.register_worker(worker_record("w1")))
    age_heartbeat(store_url, "w1", 100)
    [before] = await store.read(worker_ops.list_workers())

    await store.write(worker_ops.expire_workers(["w1"]))
    await store.write(
        worker_ops.expire_workers(["w1"])
    )  # a second neighbour saying so changes nothing

    [dead] = await store.read(worker_ops.list_workers())
    assert dead.heartbeat_at == 0  # not live: its runs may be taken over
    assert dead.last_heartbeat_at == pytest.approx(before.heartbeat_at)


async def test_wait_for_work__wakes_at_once_on_its_own_store_s_waking_write(store: Store) -> None:
    # `@wakes` on send_message: without it SQLite would sleep the whole timeout (its own
    # commits do not change PRAGMA data_version) and PostgreSQL would send no NOTIFY.
    await store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(
        run_ops.park_run("r1", held("w1"), "WAITING", wake_at=None, waiting_for="go", now=T0)
    )
    await settle(store)
    message = waits.send_message("r1", "go", "1", idempotency_key=None, now=T0)
    waited, _ = await woken_by(store, store.write(message))
    assert waited < 5


async def test_wait_for_work__wakes_at_once_on_a_new_run_of_its_own_store(store: Store) -> None:
    # SQLite: create_run's `@wakes_after` (its own commits do not change data_version).
    await settle(store)
    waited, _ = await woken_by(store, store.write(run_ops.create_run(run_record("r1"))))
    assert waited < 5


def test_wakes__is_declared_on_the_programs_that_make_runs_claimable() -> None:
    from cairn.store.programs import runs

    assert waits.send_message.wakes and worker_ops.release_run.wakes
    assert not runs.finish_run.wakes
    # A new PENDING run is claimable at its wake time; an existing one wakes nothing.
    after, later = runs.create_run.wakes_after, run_record("r1", wake_at=T0 + 5)
    assert after is not None and after((later, True), later) == T0 + 5
    assert after((later, False), later) is None
    assert after((run_record("r2"), True), run_record("r2")) == 0.0
