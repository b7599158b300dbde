"""Durable sleep: the wake time is recorded once; long sleeps leave memory and the slot."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.store import open_store
from cairn.store.programs import runs
from cairn.store.records import RunRecord

from .kit import WAIT, Gate, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def test_sleep__long_sleep_unloads_and_replays_on_wake(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @kit.step("before")
    def before() -> str:
        calls["before"] += 1
        return "b"

    @kit.step("after")
    def after() -> str:
        calls["after"] += 1
        return "a"

    @kit.workflow("sleep.long")
    async def long_sleep() -> list[str]:
        calls["workflow"] += 1
        first = await before()
        await cairn.sleep("1h")
        return [first, await after()]

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(long_sleep)
        parked = await until(engine, run.run_id, "SLEEPING")
        assert await run.status() == cairn.RunStatus.SLEEPING
        assert parked.owner is None and parked.wake_at == pytest.approx(started + 3600)
        assert engine.worker is not None and not engine.worker.active  # out of memory
        clock.advance(3599)
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        clock.advance(1)
        assert await run.result(timeout=WAIT) == ["b", "a"]
        history = await engine.history(run.run_id)
    assert calls == {"workflow": 2, "before": 1, "after": 1}  # replayed once, on wake
    assert [(h.kind, h.key, h.status) for h in history] == [
        ("step", "before#1", "completed"),
        ("sleep", "~sleep#1", "completed"),
        ("step", "after#1", "completed"),
    ]
    assert history[1].result.timestamp() == pytest.approx(started + 3600)  # the wake time


async def test_sleep__short_sleep_reports_sleeping(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @kit.workflow("sleep.short")
    async def short_sleep() -> str:
        calls["workflow"] += 1
        await cairn.sleep("500ms")
        return "rested"

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(short_sleep)
        record = await until(engine, run.run_id, "SLEEPING")
        assert record.wake_at == pytest.approx(clock.now() + 0.5, abs=0.01)
        assert await run.status() == cairn.RunStatus.SLEEPING
        clock.advance(0.5)
        assert await run.result(timeout=WAIT) == "rested"
    assert calls == {"workflow": 2}  # parked, then replayed once on wake


async def test_sleep__pause_during_a_short_sleep_holds_the_run(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("sleep.paused")
    async def paused() -> str:
        await cairn.sleep("200ms")
        return "rested"

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(paused)
        await until(engine, run.run_id, "SLEEPING")
        await run.pause()
        clock.advance(1)
        assert engine.worker is not None
        await engine.worker.claim_once()
        await asyncio.sleep(0.05)
        assert await run.status() == cairn.RunStatus.PAUSED
        await run.resume()
        assert await run.result(timeout=WAIT) == "rested"


async def test_sleep__wake_time_is_recorded_once_across_a_restart(kit: Kit, gate: Gate) -> None:
    clock = VirtualClock()
    calls: Counter[str] = Counter()

    @kit.step("hold")
    async def hold() -> str:
        calls["hold"] += 1
        return await gate()

    @kit.workflow("sleep.restart")
    async def restarted() -> str:
        await cairn.sleep("1h")
        return str(await hold())

    first = kit.engine(clock=clock)
    await first.open()
    started = clock.now()
    run = await first.start(restarted)
    await until(first, run.run_id, "SLEEPING")
    await first.close()  # the process goes away halfway through the hour
    clock.advance(1800)
    async with kit.engine(clock=clock) as second:
        run = await second.get(run.run_id)
        assert second.worker is not None and await second.worker.claim_once() == 0
        clock.advance(1799)
        assert await second.worker.claim_once() == 0
        assert await run.status() == cairn.RunStatus.SLEEPING
        clock.advance(1)  # one hour after the sleep began, not after the restart
        gate.opened = True
        assert await run.result(timeout=WAIT) == "through"
        [sleep, _] = await second.history(run.run_id)
    assert sleep.result.timestamp() == pytest.approx(started + 3600)
    assert calls == {"hold": 1}


async def test_sleep__short_sleep_wakes_on_time_after_a_restart(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("sleep.recovered")
    async def recovered() -> float:
        await cairn.sleep("800ms")
        return clock.now()

    first = kit.engine(clock=clock)
    await first.open()
    started = clock.now()
    run = await first.start(recovered)
    await until(first, run.run_id, "SLEEPING")
    await first.close()  # the engine goes away mid-sleep: the timer is in the database
    clock.advance(0.5)
    async with kit.engine(clock=clock) as second:
        run = await second.get(run.run_id)
        assert second.worker is not None and await second.worker.claim_once() == 0
        clock.advance(0.3)
        finished_at = await run.result(timeout=WAIT)
    assert finished_at == pytest.approx(started + 0.8)


async def test_sleep__sleeping_run_holds_no_worker_slot(kit: Kit) -> None:
    @kit.workflow("sleep.sleeper")
    async def sleeper() -> str:
        await cairn.sleep("1h")
        return "woke"

    @kit.workflow("sleep.quick")
    async def quick(n: int) -> int:
        return n + 1

    async with kit.engine(workers=1) as engine:
        sleeping = [await engine.start(sleeper) for _ in range(3)]
        for run in sleeping:
            await until(engine, run.run_id, "SLEEPING")
        assert await (await engine.start(quick, 1)).result(timeout=WAIT) == 2
        statuses = {await run.status() for run in sleeping}
        assert statuses == {cairn.RunStatus.SLEEPING}
        sleepers = await engine.list_runs(status="sleeping")
    assert len(sleepers) == 3


async def test_sleep_until__past_and_future_datetimes(kit: Kit) -> None:
    clock = VirtualClock(start=datetime(2030, 1, 1, tzinfo=UTC).timestamp())

    @kit.workflow("sleep.until")
    async def until_wf() -> float:
        await cairn.sleep_until(datetime(2029, 12, 31, tzinfo=UTC))  # past: returns at once
        await cairn.sleep_until(datetime(2030, 1, 1, 6))  # naive: taken as UTC
        return clock.now()

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(until_wf)
        parked = await until(engine, run.run_id, "SLEEPING")
        assert parked.wake_at == datetime(2030, 1, 1, 6, tzinfo=UTC).timestamp()
        clock.advance(timedelta(hours=6).total_seconds())
        assert await run.result(timeout=WAIT) == parked.wake_at
        kinds = [h.kind for h in await engine.history(run.run_id)]
    assert kinds == ["sleep", "sleep"]


async def test_sleep__bad_duration_raises_value_error_at_the_call(kit: Kit) -> None:
    @kit.workflow("sleep.bad")
    async def bad() -> str:
        try:
            await cairn.sleep("soon")
        except ValueError as exc:
            return str(exc)
        return "slept"

    @kit.workflow("sleep.bad_until")
    async def bad_until() -> str:
        try:
            await cairn.sleep_until("tomorrow")  # type: ignore[arg-type]
        except TypeError as exc:
            return str(exc)
        return "slept"

    async with kit.engine() as engine:
        message = await (await engine.start(bad)).result(timeout=WAIT)
        until_message = await (await engine.start(bad_until)).result(timeout=WAIT)
    assert "'soon'" in message
    assert "'tomorrow'" in until_message


async def test_sleep__outside_a_run_raises_not_in_run() -> None:
    with pytest.raises(cairn.NotInRun, match="sleep"):
        await cairn.sleep("1s")


async def test_sleep__sync_workflow_sleeps_durably(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("sleep.sync")
    def sync_sleeper() -> str:
        cairn.sleep("2h")
        return "woke"

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(sync_sleeper)
        await until(engine, run.run_id, "SLEEPING")
        clock.advance(7200)
        assert await run.result(timeout=WAIT) == "woke"


async def test_sleep__timer_fires_promptly_in_real_time(kit: Kit) -> None:
    @kit.workflow("sleep.real")
    async def real() -> float:
        await cairn.sleep("1200ms")  # beyond the in-memory window: parked, then claimed
        return cairn.current_run().started_at.timestamp()

    async with kit.engine() as engine:
        run = await engine.start(real)
        parked = await until(engine, run.run_id, "SLEEPING")
        assert parked.wake_at is not None
        finished = await until(engine, run.run_id, "COMPLETED")
    assert finished.finished_at is not None
    late = finished.finished_at - parked.wake_at
    assert 0 <= late < 0.5, f"timer fired {late:.3f}s after due"


async def test_sleep__a_timer_stored_before_the_engine_started_fires_on_time(
    kit: Kit, store_url: str
) -> None:
    # A run parked by a process that is gone: nobody notifies this engine of its timer,
    # which must still fire on time, not at the next poll (an hour here).
    @kit.workflow("sleep.stored_timer")
    async def stored_timer() -> str:
        return "woke"

    store = open_store(store_url)
    await store.open()
    try:
        now = time.time()
        await store.write(
            runs.create_run(
                RunRecord(
                    run_id="stored-timer",
                    workflow="sleep.stored_timer",
                    status="SLEEPING",
                    args='{"args": [], "kwargs": {}}',
                    created_at=now,
                    updated_at=now,
                    wake_at=now + 0.5,
                )
            )
        )
    finally:
        await store.close()

    async with kit.engine(poll_interval=3600) as engine:
        run = await engine.get("stored-timer")
        assert await run.result(timeout=WAIT) == "woke"


async def test_history__a_sleep_ends_at_its_wake_time_and_shows_it(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("sleep.history")
    async def napper() -> str:
        await cairn.sleep("1h")
        return "rested"

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(napper)
        await until(engine, run.run_id, "SLEEPING")
        [asleep] = await engine.history(run.run_id)
        clock.advance(3600)
        assert await run.result(timeout=WAIT) == "rested"
        [woke] = await engine.history(run.run_id)
    wake = datetime.fromtimestamp(started + 3600, UTC)
    assert (asleep.status, asleep.finished_at, asleep.result) == ("sleeping", None, wake)
    assert (woke.status, woke.finished_at, woke.result) == ("completed", wake, wake)
    assert woke.started_at is not None
    assert (woke.finished_at - woke.started_at).total_seconds() == pytest.approx(3600)


async def test_history__a_sleep_cut_short_by_a_cancel_ends_with_its_run(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("sleep.cancelled")
    async def napper() -> str:
        await cairn.sleep("1h")
        return "rested"

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(napper)
        await until(engine, run.run_id, "SLEEPING")
        clock.advance(60)
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        sleep = next(h for h in await engine.history(run.run_id) if h.kind == "sleep")
        ended = await engine.control.record(run.run_id)
    assert sleep.status == "cancelled"  # cut short: it did not complete
    assert sleep.finished_at is not None and ended.finished_at is not None
    assert sleep.finished_at.timestamp() == pytest.approx(ended.finished_at)
