"""A run started by a name this process does not import gets what its workers declare.

A web app with a `Client`, the dashboard or `cairn run NAME --enqueue` start runs by
name. The workers that import the workflow say its queue and max_recoveries; a run
started without them would pass no queue limit, and a worker serving only that queue
would never take it.
"""

from __future__ import annotations

import asyncio

import cairn
from cairn.store.programs import runs as run_ops
from cairn.store.programs import schedules as schedule_ops

from .kit import WAIT, Kit


async def test_start_by_name__the_run_gets_its_workers_queue_and_recoveries(kit: Kit) -> None:
    remote = kit.fresh()

    @remote.workflow("remote.mail", queue="mail", max_recoveries=3)
    async def mail() -> None:
        return None

    async with remote.engine():
        pass  # registered and stopped: its declarations stay
    async with kit.engine(workers=0) as queuer:
        run = await queuer.start("remote.mail")
        stored = await queuer.store.read(run_ops.get_run(run.run_id))
        await queuer.schedules.create("mail-hourly", "remote.mail", every="1h")
        schedule = await queuer.store.read(schedule_ops.get_schedule("mail-hourly"))
    assert stored is not None
    assert (stored.queue, stored.max_recoveries) == ("mail", 3)
    assert schedule is not None
    assert (schedule.queue, schedule.max_recoveries) == ("mail", 3)


async def test_start_by_name__the_queue_limits_hold_and_a_queue_worker_takes_the_runs(
    kit: Kit,
) -> None:
    remote = kit.fresh()
    running = {"now": 0, "peak": 0}

    @remote.step("remote.slow.work")
    async def work() -> None:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.05)
        running["now"] -= 1

    @remote.workflow("remote.slow", queue="one-at-a-time")
    async def slow() -> None:
        await work()

    async with remote.engine(workers=4, queues=["one-at-a-time"]) as worker:
        await worker.queues.update("one-at-a-time", concurrency=1)
        async with kit.engine(workers=0) as queuer:
            runs = [await queuer.start("remote.slow") for _ in range(4)]
            for run in runs:
                await asyncio.wait_for(run.result(), WAIT)
    assert running["peak"] == 1


async def test_start_by_name__an_option_given_wins_over_the_declared_queue(kit: Kit) -> None:
    remote = kit.fresh()

    @remote.workflow("remote.routed", queue="declared")
    async def routed() -> None:
        return None

    async with remote.engine():
        pass
    async with kit.engine(workers=0) as queuer:
        run = await queuer.start("remote.routed", queue="chosen")
        stored = await queuer.store.read(run_ops.get_run(run.run_id))
        unknown = await queuer.start("later.flow", allow_unknown=True)
        later = await queuer.store.read(run_ops.get_run(unknown.run_id))
    assert stored is not None and stored.queue == "chosen"
    assert later is not None and (later.queue, later.max_recoveries) == (None, 8)
    assert cairn.RunStatus.PENDING.value == later.status
