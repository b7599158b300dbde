"""Schedules on both stores, driven by a virtual clock: ticks, overlap, catch-up, control.

The scheduler loop runs in each engine; tests also call `engine.scheduler.run_due()` so a
tick is known to be fired when the call returns (whichever of the two fired it).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

import cairn
from cairn.authoring.schedules import make_schedule
from cairn.clock import VirtualClock
from cairn.store.programs import schedules

from .kit import WAIT, Kit

START = datetime(2024, 3, 30, 12, 0, tzinfo=UTC).timestamp()
LEASE = "30d"  # the virtual clock jumps hours: keep our own heartbeat fresh throughout


def at(seconds: float) -> str:
    """The run id suffix of the tick `seconds` after START."""
    return datetime.fromtimestamp(START + seconds, UTC).isoformat().replace("+00:00", "Z")


async def fire(engine: cairn.Engine) -> None:
    """Fire what is due now; returns once no tick due now is left unfired.

    The engine's own loop may be firing at the same moment; a tick it holds makes our
    attempt wait for its commit and find nothing, so look again until nothing is due.
    """
    assert engine.scheduler is not None
    now = engine.clock.now()
    while True:
        await engine.scheduler.run_due()
        due = await engine.store.read(schedules.due_schedules(now, 1000))
        if not any(record.next_tick is not None and record.next_tick <= now for record in due):
            return


async def runs_of(engine: cairn.Engine, workflow: str) -> list[str]:
    page = await engine.list_runs(workflow=workflow, limit=1000)
    return sorted(run.run_id for run in page)


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    async with asyncio.timeout(WAIT):
        while not await check():
            await asyncio.sleep(0.01)  # polling the database, not synchronising


async def test_schedule__each_tick_starts_one_run_with_scheduled_at(kit: Kit) -> None:
    clock = VirtualClock(START + 5)

    @kit.workflow("sched.stamp")
    async def stamp(label: str, *, n: int) -> dict[str, Any]:
        info = cairn.current_run()
        return {"at": info.scheduled_at, "label": label, "n": n}

    make_schedule(stamp, every="1m", args=("hello",), kwargs={"n": 3}, reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        await fire(engine)
        assert await runs_of(engine, "sched.stamp") == []  # a new schedule waits for its tick
        results = []
        for minute in (1, 2, 3):
            clock.advance(60)
            await fire(engine)
            run = await engine.get(f"sched:sched.stamp:{at(minute * 60)}")
            results.append(await run.result(timeout=WAIT))
        ids = await runs_of(engine, "sched.stamp")
        assert ids == [f"sched:sched.stamp:{at(m * 60)}" for m in (1, 2, 3)]
        assert [r["at"] for r in results] == [
            datetime.fromtimestamp(START + m * 60, UTC) for m in (1, 2, 3)
        ]
        assert {(r["label"], r["n"]) for r in results} == {("hello", 3)}
        [info] = await engine.schedules.list()
    assert info.id == "sched.stamp" and info.source == "code" and not info.paused
    assert info.next_tick == datetime.fromtimestamp(START + 240, UTC)
    assert info.last_run_id == ids[-1]


async def test_schedule__cron_in_a_time_zone(kit: Kit) -> None:
    clock = VirtualClock(START)  # Saturday 2024-03-30 12:00 UTC; Berlin springs forward Sunday

    @kit.workflow("sched.morning")
    async def morning() -> Any:
        return cairn.current_run().scheduled_at

    make_schedule(morning, cron="0 9 * * *", tz="Europe/Berlin", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        [info] = await engine.schedules.list()
        sunday_9_cest = datetime(2024, 3, 31, 7, 0, tzinfo=UTC)
        assert info.next_tick == sunday_9_cest
        clock.advance(sunday_9_cest.timestamp() - START)
        await fire(engine)
        [run_id] = await runs_of(engine, "sched.morning")
        assert run_id == "sched:sched.morning:2024-03-31T07:00:00Z"
        assert await (await engine.get(run_id)).result(timeout=WAIT) == sunday_9_cest


def _blocking(kit: Kit, name: str, overlap: str) -> None:
    @kit.workflow(name)
    async def busy() -> str:
        if cairn.current_run().scheduled_at == datetime.fromtimestamp(START + 60, UTC):
            await cairn.wait_for_event("release")  # only the first tick's run blocks
        return "done"

    make_schedule(busy, every="1m", overlap=overlap, reg=kit.registry)


async def test_overlap__skip_drops_ticks_while_the_run_is_active(kit: Kit) -> None:
    clock = VirtualClock(START)
    _blocking(kit, "sched.skip", "skip")
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        clock.advance(60)
        await fire(engine)
        first = await engine.get(f"sched:sched.skip:{at(60)}")
        await until(lambda: _is(first, cairn.RunStatus.WAITING), "first run waiting")
        for _ in range(2):
            clock.advance(60)
            await fire(engine)
        assert await runs_of(engine, "sched.skip") == [first.run_id]
        await first.send_event("release")
        assert await first.result(timeout=WAIT) == "done"
        clock.advance(60)
        await fire(engine)
        assert await runs_of(engine, "sched.skip") == [first.run_id, f"sched:sched.skip:{at(240)}"]


async def _is(handle: cairn.RunHandle, status: cairn.RunStatus) -> bool:
    return await handle.status() == status


async def test_overlap__buffer_one_starts_one_waiting_tick_when_the_run_ends(kit: Kit) -> None:
    clock = VirtualClock(START)
    _blocking(kit, "sched.buffer", "buffer_one")
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        clock.advance(60)
        await fire(engine)
        first = await engine.get(f"sched:sched.buffer:{at(60)}")
        await until(lambda: _is(first, cairn.RunStatus.WAITING), "first run waiting")
        for _ in range(3):  # ticks at 2, 3 and 4 minutes: the first is kept, the others dropped
            clock.advance(60)
            await fire(engine)
        assert await runs_of(engine, "sched.buffer") == [first.run_id]
        [info] = await engine.schedules.list()
        assert info.buffered_tick == datetime.fromtimestamp(START + 120, UTC)
        await first.send_event("release")
        await first.result(timeout=WAIT)
        await fire(engine)
        buffered = f"sched:sched.buffer:{at(120)}"
        assert await runs_of(engine, "sched.buffer") == [first.run_id, buffered]
        assert await (await engine.get(buffered)).result(timeout=WAIT) == "done"
        [info] = await engine.schedules.list()
        assert info.buffered_tick is None and info.last_run_id == buffered


async def test_overlap__allow_starts_every_tick(kit: Kit) -> None:
    clock = VirtualClock(START)
    _blocking(kit, "sched.allow", "allow")
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        clock.advance(60)
        await fire(engine)
        first = await engine.get(f"sched:sched.allow:{at(60)}")
        await until(lambda: _is(first, cairn.RunStatus.WAITING), "first run waiting")
        clock.advance(60)
        await fire(engine)
        second = await engine.get(f"sched:sched.allow:{at(120)}")
        assert await second.result(timeout=WAIT) == "done"
        assert await first.status() == cairn.RunStatus.WAITING  # still running alongside
        await first.send_event("release")
        assert await first.result(timeout=WAIT) == "done"


async def test_overlap__cancel_other_cancels_the_active_run_then_starts(kit: Kit) -> None:
    clock = VirtualClock(START)
    _blocking(kit, "sched.cancel", "cancel_other")
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        clock.advance(60)
        await fire(engine)
        first = await engine.get(f"sched:sched.cancel:{at(60)}")
        await until(lambda: _is(first, cairn.RunStatus.WAITING), "first run waiting")
        clock.advance(60)
        await fire(engine)
        with pytest.raises(cairn.RunCancelled):
            await first.result(timeout=WAIT)
        second = await engine.get(f"sched:sched.cancel:{at(120)}")
        assert await second.result(timeout=WAIT) == "done"


async def test_pause_resume__paused_ticks_are_not_caught_up(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.pausable")
    async def pausable() -> None:
        return None

    make_schedule(pausable, every="1m", catchup="1h", overlap="allow", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        paused = await engine.schedules.pause("sched.pausable")
        assert paused.paused
        clock.advance(300)
        await fire(engine)
        assert await runs_of(engine, "sched.pausable") == []
        resumed = await engine.schedules.resume("sched.pausable")
        assert not resumed.paused
        assert resumed.next_tick == datetime.fromtimestamp(START + 360, UTC)
        clock.advance(60)
        await fire(engine)
        assert await runs_of(engine, "sched.pausable") == [f"sched:sched.pausable:{at(360)}"]
        await engine.schedules.pause("sched.pausable")
    # A pause is the operator's: reopening with the same code keeps it.
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        assert (await engine.schedules.get("sched.pausable")).paused


async def test_trigger_and_delete(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.manual")
    async def manual(x: int) -> Any:
        return [x, cairn.current_run().scheduled_at]

    async with kit.engine(clock=clock, lease=LEASE) as engine:
        created = await engine.schedules.create(
            "hourly-manual", manual, cron="0 * * * *", args=[7], overlap="skip"
        )
        assert created.source == "api" and created.workflow == "sched.manual"
        assert created.next_tick == datetime.fromtimestamp(START + 3600, UTC)
        with pytest.raises(cairn.DuplicateSchedule, match="schedule 'hourly-manual' already"):
            await engine.schedules.create("hourly-manual", manual, every="1h", args=[7])
        with pytest.raises(ValueError):  # DuplicateSchedule is a ValueError too
            await engine.schedules.create("hourly-manual", manual, cron="0 * * * *", args=[8])
        # The same definition again (a retried call, say) returns the existing schedule.
        same = await engine.schedules.create(
            "hourly-manual", manual, cron="0 * * * *", args=[7], overlap="skip"
        )
        assert same == created
        assert [s.id for s in await engine.schedules.list()].count("hourly-manual") == 1
        handle = await engine.schedules.trigger("hourly-manual")
        assert handle.run_id.startswith("sched:hourly-manual:trigger:")
        now = datetime.fromtimestamp(START, UTC)
        assert await handle.result(timeout=WAIT) == [7, now]
        again = await engine.schedules.trigger("hourly-manual")
        assert again != handle and await again.result(timeout=WAIT) == [7, now]
        await engine.schedules.delete("hourly-manual")
        clock.advance(3600)
        await fire(engine)
        assert len(await runs_of(engine, "sched.manual")) == 2
        for action in ("pause", "resume", "delete", "trigger", "get"):
            with pytest.raises(cairn.ScheduleNotFound, match="schedule 'hourly-manual' not found"):
                await getattr(engine.schedules, action)("hourly-manual")
        assert await engine.schedules.list() == []


async def test_create__bad_options_fail_before_storing(kit: Kit) -> None:
    async with kit.engine(workers=0) as engine:
        with pytest.raises(ValueError, match="invalid cron expression '0 25 \\* \\* \\*'"):
            await engine.schedules.create("bad", "wf", cron="0 25 * * *")
        with pytest.raises(ValueError, match="unknown time zone 'Nowhere/City'"):
            await engine.schedules.create("bad", "wf", cron="0 1 * * *", tz="Nowhere/City")
        with pytest.raises(cairn.SerializationError, match="schedule 'bad'"):
            await engine.schedules.create(
                "bad", "wf", every="1h", args=[object()], allow_unknown=True
            )
        assert await engine.schedules.list() == []


async def test_catchup__missed_ticks_inside_the_window_run_once_after_downtime(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.catchup")
    async def catchup() -> Any:
        return cairn.current_run().scheduled_at

    make_schedule(catchup, every="1m", catchup="5m", overlap="allow", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        clock.advance(60)
        await fire(engine)
        assert await runs_of(engine, "sched.catchup") == [f"sched:sched.catchup:{at(60)}"]
    clock.advance(600)  # no engine runs for ten minutes: ticks 2..11 are missed
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        await fire(engine)
        ids = await runs_of(engine, "sched.catchup")
        # Ticks at most 5 minutes old (6..11) run once each; 2..5 are dropped.
        assert ids == [f"sched:sched.catchup:{at(m * 60)}" for m in (1, 6, 7, 8, 9, 10, 11)]
        for run_id in ids:
            assert await (await engine.get(run_id)).status() != cairn.RunStatus.FAILED
        await fire(engine)
        assert len(await runs_of(engine, "sched.catchup")) == 7


async def test_catchup__with_skip_a_burst_of_missed_ticks_starts_one_run(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.burst")
    async def burst() -> None:
        return None

    make_schedule(burst, every="1m", catchup="1h", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        pass
    clock.advance(600)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        await fire(engine)
        assert await runs_of(engine, "sched.burst") == [f"sched:sched.burst:{at(60)}"]


async def test_declaration__changed_timing_moves_the_next_tick(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.retimed")
    async def retimed() -> None:
        return None

    make_schedule(retimed, every="1m", overlap="allow", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE):
        pass
    clock.advance(600)
    later = kit.fresh()
    later.registry.add_workflow(kit.registry.workflows["sched.retimed"])
    make_schedule("sched.retimed", every="1h", overlap="allow", reg=later.registry)
    async with later.engine(clock=clock, lease=LEASE) as engine:
        await fire(engine)
        assert await runs_of(engine, "sched.retimed") == []  # nothing caught up: new timing
        [info] = await engine.schedules.list()
        assert info.every is not None and info.every.total_seconds() == 3600
        assert info.next_tick == datetime.fromtimestamp(START + 3600, UTC)


async def test_two_engines__each_tick_runs_once(kit: Kit) -> None:
    # Two engines in one process tell each other's liveness by comparing the registration
    # time with the process start time, so their clock must not be behind the real one.
    start = float(math.floor(time.time()))
    clock = VirtualClock(start)
    calls: list[Any] = []

    @kit.workflow("sched.shared")
    async def shared() -> None:
        calls.append(cairn.current_run().scheduled_at)

    make_schedule(shared, every="1s", overlap="allow", reg=kit.registry)
    async with (
        kit.engine(clock=clock, lease=LEASE) as one,
        kit.engine(clock=clock, lease=LEASE) as two,
    ):
        for _ in range(20):
            clock.advance(1)
            await asyncio.gather(fire(one), fire(two), fire(one), fire(two))
        ids = await runs_of(one, "sched.shared")
        for run_id in ids:
            await (await one.get(run_id)).result(timeout=WAIT)
    ticks = [datetime.fromtimestamp(start + s, UTC) for s in range(1, 21)]
    assert ids == sorted(
        f"sched:sched.shared:{t.isoformat().replace('+00:00', 'Z')}" for t in ticks
    )
    assert sorted(calls) == ticks


async def test_catchup__a_long_backlog_is_fired_in_batches_by_one_pass(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.backlog")
    async def backlog() -> None:
        return None

    make_schedule(backlog, every="1s", catchup="150s", overlap="allow", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE):
        pass  # stores the schedule
    clock.advance(1000)
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        await fire(engine)
        ids = await runs_of(engine, "sched.backlog")
        for run_id in ids:
            await (await engine.get(run_id)).result(timeout=WAIT)
    assert ids == [f"sched:sched.backlog:{at(s)}" for s in range(850, 1001)]


async def test_catchup__a_short_window_drops_ticks_missed_longer_ago(kit: Kit) -> None:
    clock = VirtualClock(START)

    @kit.workflow("sched.short")
    async def short() -> Any:
        return cairn.current_run().scheduled_at

    make_schedule(short, every="1s", catchup="2s", overlap="allow", reg=kit.registry)
    async with kit.engine(clock=clock, lease=LEASE):
        pass  # stores the schedule; its next tick is START + 1
    clock.advance(30)  # no engine runs for 30 s: ticks 1..30 are missed
    async with kit.engine(clock=clock, lease=LEASE) as engine:
        await fire(engine)
        await fire(engine)
        ids = await runs_of(engine, "sched.short")
        for run_id in ids:
            await (await engine.get(run_id)).result(timeout=WAIT)
        [info] = await engine.schedules.list()
    # Only ticks at most 2 s old run, once each; 1..27 are dropped.
    assert ids == [f"sched:sched.short:{at(s)}" for s in (28, 29, 30)]
    assert info.next_tick == datetime.fromtimestamp(START + 31, UTC)
