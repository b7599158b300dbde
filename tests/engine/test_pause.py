"""Pause and resume: PAUSED at the next durable point; timers and events kept meanwhile."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def test_pause__running_run_pauses_at_its_next_durable_point(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("first")
    async def first() -> str:
        calls["first"] += 1
        entered.set()
        await release.wait()
        return "one"

    @kit.step("second")
    def second() -> str:
        calls["second"] += 1
        return "two"

    @kit.workflow("pause.running")
    async def running() -> list[str]:
        return [await first(), await second()]

    async with kit.engine() as engine:
        run = await engine.start(running)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        assert await run.pause() == cairn.RunStatus.RUNNING  # mid-step: not yet
        release.set()
        paused = await until(engine, run.run_id, "PAUSED")
        assert paused.owner is None
        assert engine.worker is not None and not engine.worker.active  # holds no slot
        assert calls == {"first": 1}
        assert await run.resume() == cairn.RunStatus.WAITING
        assert await run.result(timeout=WAIT) == ["one", "two"]
    assert calls == {"first": 1, "second": 1}


async def test_pause__sleeping_run_keeps_its_timer_until_resumed(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("pause.sleeper")
    async def sleeper() -> float:
        await cairn.sleep("1h")
        return clock.now()

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(sleeper)
        await until(engine, run.run_id, "SLEEPING")
        assert await run.pause() == cairn.RunStatus.PAUSED
        clock.advance(3600 * 2)  # the timer comes due while paused
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        assert await run.status() == cairn.RunStatus.PAUSED
        await run.resume()
        woke = await run.result(timeout=WAIT)
        [sleep] = await engine.history(run.run_id)
    assert woke == pytest.approx(started + 7200)  # honoured on resume, not restarted
    assert sleep.result.timestamp() == pytest.approx(started + 3600)


async def test_pause__resumed_before_the_timer_sleeps_what_is_left(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("pause.early_resume")
    async def sleeper() -> float:
        await cairn.sleep("1h")
        return clock.now()

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(sleeper)
        await until(engine, run.run_id, "SLEEPING")
        await run.pause()
        clock.advance(600)
        await run.resume()
        parked = await until(engine, run.run_id, "SLEEPING")
        assert parked.wake_at == pytest.approx(started + 3600)
        clock.advance(3000)
        assert await run.result(timeout=WAIT) == pytest.approx(started + 3600)


async def test_pause__events_sent_while_paused_are_kept(kit: Kit) -> None:
    @kit.workflow("pause.events")
    async def collect() -> list[Any]:
        return [await cairn.wait_for_event("item") for _ in range(2)]

    async with kit.engine() as engine:
        run = await engine.start(collect)
        await until(engine, run.run_id, "WAITING")
        assert await engine.pause(run.run_id) == cairn.RunStatus.PAUSED
        await run.send_event("item", "a")
        await run.send_event("item", "b")
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        assert await run.status() == cairn.RunStatus.PAUSED
        await engine.resume(run.run_id)
        assert await run.result(timeout=WAIT) == ["a", "b"]


async def test_pause__pending_run_waits_for_resume(kit: Kit) -> None:
    @kit.workflow("pause.pending")
    async def pending() -> str:
        return "ran"

    async with kit.engine(workers=0) as queuer:
        run = await queuer.start(pending)
        assert await queuer.pause(run.run_id) == cairn.RunStatus.PAUSED
    async with kit.engine() as engine:
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        handle = await engine.get(run.run_id)
        assert await handle.status() == cairn.RunStatus.PAUSED
        assert await handle.resume() == cairn.RunStatus.PENDING
        assert await handle.result(timeout=WAIT) == "ran"


async def test_pause__paused_run_can_be_cancelled(kit: Kit) -> None:
    @kit.workflow("pause.then_cancel")
    async def waiting() -> None:
        await cairn.wait_for_event("never")

    async with kit.engine() as engine:
        run = await engine.start(waiting)
        await until(engine, run.run_id, "WAITING")
        await run.pause()
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)


async def test_pause__resume_of_a_run_not_paused_changes_nothing(kit: Kit) -> None:
    @kit.workflow("pause.noop")
    async def waiting() -> Any:
        return await cairn.wait_for_event("go")

    async with kit.engine() as engine:
        run = await engine.start(waiting)
        await until(engine, run.run_id, "WAITING")
        assert await run.resume() == cairn.RunStatus.WAITING
        await run.send_event("go", 1)
        assert await run.result(timeout=WAIT) == 1
        assert await run.pause() == cairn.RunStatus.COMPLETED
        assert await run.resume() == cairn.RunStatus.COMPLETED
        with pytest.raises(cairn.RunNotFound):
            await engine.pause("nobody")


async def test_pause__in_memory_sleep_is_interrupted(kit: Kit) -> None:
    @kit.workflow("pause.memory_sleep")
    async def napper() -> str:
        await cairn.sleep("800ms")
        return "rested"

    async with kit.engine() as engine:
        run = await engine.start(napper)
        async with asyncio.timeout(WAIT):
            while not await engine.history(run.run_id):
                await asyncio.sleep(0.005)
        loop = asyncio.get_running_loop()
        asked = loop.time()
        await run.pause()
        await until(engine, run.run_id, "PAUSED")
        assert loop.time() - asked < 0.5
        await run.resume()
        assert await run.result(timeout=WAIT) == "rested"


async def test_pause__from_another_process_as_the_run_parks_is_not_lost(kit: Kit) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("work")
    async def work() -> None:
        entered.set()
        await release.wait()

    @kit.workflow("pause.parking")
    async def parking() -> Any:
        await work()
        return await cairn.wait_for_event("go")

    # The executing engine looks for requests made elsewhere only once a minute: the pause
    # is in the database, unseen, when the run decides to wait.
    async with kit.engine(poll_interval=60) as engine, kit.engine(workers=0) as elsewhere:
        run = await engine.start(parking)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        assert await elsewhere.pause(run.run_id) == cairn.RunStatus.RUNNING
        release.set()
        parked = await until(engine, run.run_id, "PAUSED", "WAITING")
        await elsewhere.send_event(run.run_id, "go", "went")
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        assert parked.status == "PAUSED" and await run.status() == cairn.RunStatus.PAUSED
        await elsewhere.resume(run.run_id)
        assert engine.worker is not None
        engine.worker.wake()
        assert await run.result(timeout=WAIT) == "went"


async def test_pause__a_cancel_requested_of_a_parked_run_stands(kit: Kit) -> None:
    """A pause or resume after a cancel nobody has acted on yet leaves the cancel in place.

    Before, a pause of a parked run with a cancel pending (no worker had taken it up) set
    it PAUSED and cleared the cancel; resumed, it waited on as if never cancelled.
    """

    @kit.workflow("pause.after_cancel")
    async def waiting() -> None:
        await cairn.wait_for_event("never")

    async with kit.engine() as engine:
        run = await engine.start(waiting)
        await until(engine, run.run_id, "WAITING")
    async with kit.engine(workers=0) as control:  # no worker acts on the cancel meanwhile
        assert await control.cancel(run.run_id) == cairn.RunStatus.WAITING
        assert await control.pause(run.run_id) == cairn.RunStatus.WAITING
        assert await control.resume(run.run_id) == cairn.RunStatus.WAITING
        assert (await control.control.record(run.run_id)).control == "cancel"
    async with kit.engine() as engine:
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get(run.run_id)).result(timeout=WAIT)


async def test_pause__a_cancel_requested_of_a_running_run_stands(kit: Kit) -> None:
    """Mid-step, a pause and a resume after a cancel do not overwrite it: the run ends
    CANCELLED where it next parks, not PAUSED, nor waiting on.

    Before, the pause overwrote the stored cancel and the resume cleared it. The engine
    that executes the run looks for requests made elsewhere once a minute here, so what
    it meets when it parks is what the database holds.
    """
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("held")
    async def held() -> None:
        entered.set()
        await release.wait()

    @kit.workflow("pause.running_after_cancel")
    async def running() -> Any:
        await held()
        return await cairn.wait_for_event("go")

    async with kit.engine(poll_interval=60) as engine, kit.engine(workers=0) as elsewhere:
        run = await engine.start(running)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        assert await elsewhere.cancel(run.run_id) == cairn.RunStatus.RUNNING
        assert await elsewhere.pause(run.run_id) == cairn.RunStatus.RUNNING
        assert await elsewhere.resume(run.run_id) == cairn.RunStatus.RUNNING
        assert (await engine.control.record(run.run_id)).control == "cancel"
        release.set()
        ended = await until(engine, run.run_id, "CANCELLED", "PAUSED", "WAITING")
    assert ended.status == "CANCELLED"
