"""Workers: registration, heartbeats, handing runs back, and wake-ups for new work."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from cairn.store import Store

from .kit import LEASE, T0, OpenStore, run_record, worker_record


async def test_register_worker__inserts_then_refreshes(store: Store) -> None:
    await store.register_worker(worker_record("w1"))
    await store.register_worker(worker_record("w1", heartbeat_at=T0 + 5))
    await store.register_worker(worker_record("w2"))

    workers = await store.list_workers()

    assert [(w.worker_id, w.heartbeat_at) for w in workers] == [("w1", T0 + 5), ("w2", T0)]


async def test_register_worker__keeps_the_workflows_it_executes(store: Store) -> None:
    await store.register_worker(replace(worker_record("w1"), workflows='["a", "b"]'))
    await store.register_worker(replace(worker_record("w1"), workflows='["a"]'))  # redeployed
    await store.register_worker(worker_record("w2"))  # says nothing

    assert [w.workflows for w in await store.list_workers()] == ['["a"]', None]


async def test_heartbeat__moves_the_heartbeat(store: Store) -> None:
    await store.register_worker(worker_record("w1"))

    await store.heartbeat("w1", T0 + 7)

    assert [w.heartbeat_at for w in await store.list_workers()] == [T0 + 7]


async def test_expire_workers__makes_their_runs_recoverable_at_once(store: Store) -> None:
    await store.register_worker(worker_record("w1", heartbeat_at=T0 + 100))
    await store.create_run(run_record("r1", status="RUNNING", owner="w1"))
    before = await store.claim_runs("w2", 10, now=T0, lease=LEASE)

    await store.expire_workers(["w1"])

    after = await store.claim_runs("w2", 10, now=T0, lease=LEASE)
    assert before.runs == []
    assert [(run.run_id, run.owner, run.recoveries) for run in after.runs] == [("r1", "w2", 1)]


async def test_remove_worker__hands_its_running_runs_back_as_pending(store: Store) -> None:
    await store.register_worker(worker_record("w1"))
    await store.create_run(run_record("r1", status="RUNNING", owner="w1"))
    await store.create_run(run_record("r2", status="RUNNING", owner="w2"))

    await store.remove_worker("w1")

    r1, r2 = await store.get_run("r1"), await store.get_run("r2")
    assert r1 is not None and r2 is not None
    assert (r1.status, r1.owner) == ("PENDING", None)
    assert (r2.status, r2.owner) == ("RUNNING", "w2")
    assert await store.list_workers() == []


async def settle(store: Store) -> None:
    """Use up hints already pending (the first call starts listening, and reports it)."""
    loop = asyncio.get_running_loop()
    for _ in range(100):
        started = loop.time()
        await store.wait_for_work(0.05)
        if loop.time() - started >= 0.05:
            return
    raise AssertionError("wait_for_work never stays quiet")


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
    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.create_task(worker.wait_for_work(30))
    await asyncio.sleep(0)

    await client.create_run(run_record("r1"))

    async with asyncio.timeout(10):
        await waiting
    assert loop.time() - started < 10


async def test_wait_for_work__wakes_on_a_message_for_a_waiting_run(
    open_store_at: OpenStore,
) -> None:
    worker, client = await open_store_at(), await open_store_at()
    await worker.create_run(run_record("r1", status="RUNNING", owner="w1"))
    await worker.park_run("r1", "w1", "WAITING", wake_at=None, waiting_for="go", now=T0)
    await settle(worker)
    waiting = asyncio.create_task(worker.wait_for_work(30))
    await asyncio.sleep(0)

    await client.send_message("r1", "go", "1", idempotency_key=None, now=T0)

    async with asyncio.timeout(10):
        await waiting
