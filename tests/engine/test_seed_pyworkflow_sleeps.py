"""Coming from pyworkflow (seed 004's sleep page): `sleep(...)` in each spelling it shows.

Durations as short strings ("30s", "1h30m"), timedeltas, seconds, datetimes naive and
zoned; sleeps in loops between steps; a workflow giving up with `FatalError`; and the
page's alternative to a year-long sleep, `schedule_workflow(...)` not awaited. On both
stores, on a virtual clock, with only `from cairn import ...` where pyworkflow's stood.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from cairn import Engine, FatalError, RunFailed, schedule_workflow, sleep, step, workflow
from cairn.clock import VirtualClock

from .kit import WAIT, Kit
from .seeds import FINISHED, finish, until


async def sleeps_taken(engine: Engine, clock: VirtualClock, run_id: str) -> list[float]:
    """Each sleep the run parks in, as seconds from its park; the clock moved past each."""
    taken: list[float] = []
    while True:
        record = await until(engine, run_id, "SLEEPING", *FINISHED)
        if record.status != "SLEEPING":
            return taken
        assert record.wake_at is not None
        taken.append(round(record.wake_at - clock.now(), 3))
        clock.advance(record.wake_at - clock.now())
        assert engine.worker is not None
        engine.worker.wake()
        await until_moved_on(engine, run_id, record.wake_at)


async def until_moved_on(engine: Engine, run_id: str, wake_at: float) -> None:
    """Until the run is no longer parked in the sleep that ends at `wake_at`."""
    async with asyncio.timeout(WAIT):
        while True:
            record = await engine.control.record(run_id)
            if record.status != "SLEEPING" or record.wake_at != wake_at:
                return
            await asyncio.sleep(0.005)


async def test_pyworkflow__every_duration_spelling_of_sleep(kit: Kit) -> None:
    @workflow(name="pyworkflow.spellings")
    async def spellings() -> str:
        await sleep("30s")
        await sleep("5m")
        await sleep("2h")
        await sleep("1d")
        await sleep("1w")
        await sleep("1h30m")
        await sleep("2d12h")
        await sleep(timedelta(hours=2, minutes=30))
        await sleep(timedelta(days=7))
        await sleep(300)
        await sleep("365d")
        return "rested"

    kit.registry.add_workflow(spellings)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(spellings)
        taken = await sleeps_taken(engine, clock, run.run_id)
        assert await run.result(timeout=WAIT) == "rested"
    hour, day = 3600.0, 86400.0
    assert taken == [
        30.0,
        300.0,
        2 * hour,
        day,
        7 * day,
        1.5 * hour,
        2.5 * day,
        2.5 * hour,
        7 * day,
        300.0,
        365 * day,
    ]


async def test_pyworkflow__sleep_until_a_datetime_naive_or_zoned(kit: Kit) -> None:
    pytz = pytest.importorskip("pytz")
    clock = VirtualClock()
    year = datetime.fromtimestamp(clock.now(), UTC).year + 2
    eastern = pytz.timezone("US/Eastern")
    christmas = datetime(year, 12, 25, 9, 0, 0)  # naive: UTC
    meeting = eastern.localize(datetime(year + 1, 1, 15, 9, 0))

    @workflow(name="pyworkflow.until")
    async def until_then() -> str:
        await sleep(christmas)
        await sleep(meeting.replace(hour=10, minute=0))
        return "on time"

    kit.registry.add_workflow(until_then)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(until_then)
        start = clock.now()
        taken = await sleeps_taken(engine, clock, run.run_id)
        assert await run.result(timeout=WAIT) == "on time"
    first = christmas.replace(tzinfo=UTC).timestamp()
    second = eastern.localize(datetime(year + 1, 1, 15, 10, 0)).timestamp()
    assert taken == [pytest.approx(first - start), pytest.approx(second - first)]


async def test_pyworkflow__drip_and_rate_limit_sleep_between_steps(kit: Kit) -> None:
    sent: list[str] = []
    calls: Counter[str] = Counter()

    @step()
    async def send_email(user_id: str, subject: str) -> dict[str, str]:
        sent.append(f"{user_id}: {subject}")
        return {"to": user_id}

    @step(timeout="30s")
    async def call_api(item: int) -> int:
        calls[str(item)] += 1
        return item

    @workflow(name="pyworkflow.drip_batches")
    async def drip_batches(user_id: str, items: list[int]) -> int:
        await send_email(user_id, "Welcome!")
        await sleep("1d")
        await send_email(user_id, "Getting started tips")
        done = 0
        for i, item in enumerate(items):
            done += await call_api(item)
            if (i + 1) % 10 == 0:
                await sleep("1m")
        return done

    kit.registry.add_workflow(drip_batches)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(drip_batches, "u-9", list(range(25)))
        taken = await sleeps_taken(engine, clock, run.run_id)
        assert await run.result(timeout=WAIT) == sum(range(25))
    assert taken == [86400.0, 60.0, 60.0]
    assert sent == ["u-9: Welcome!", "u-9: Getting started tips"]
    assert set(calls.values()) == {1} and len(calls) == 25  # none ran again after a sleep


class TemporaryError(Exception):
    """The service is down for now."""


async def test_pyworkflow__a_workflow_backs_off_by_sleeping_then_gives_up(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @step(max_retries=0)
    async def risky_step() -> str:
        calls["risky"] += 1
        raise TemporaryError("not yet")

    @workflow(name="pyworkflow.resilient")
    async def resilient_operation() -> str:
        for attempt in range(4):
            try:
                return str(await risky_step())
            except TemporaryError:
                if attempt < 3:
                    await sleep(f"{2**attempt}m")
        raise FatalError("All retries exhausted")

    kit.registry.add_workflow(resilient_operation)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(resilient_operation)
        taken = await sleeps_taken(engine, clock, run.run_id)
        with pytest.raises(RunFailed, match="All retries exhausted") as failed:
            await run.result(timeout=WAIT)
        record = await engine.control.record(run.run_id)
    assert taken == [60.0, 120.0, 240.0]
    assert (record.status, calls["risky"]) == ("FAILED", 4)
    assert failed.value.error_type.endswith("FatalError")


async def test_pyworkflow__a_bare_except_around_a_step_then_sleep(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @step(max_retries=0)
    async def my_step() -> str:
        calls["my_step"] += 1
        if calls["my_step"] < 3:
            raise ConnectionError("flaky")
        return "through"

    @workflow(name="pyworkflow.bare_except")
    async def my_workflow() -> int:
        for i in range(3):
            try:
                await my_step()
                break
            except:  # noqa: E722 - the seed's spelling: any failure of the step
                await sleep(f"{2**i}m")
        return i

    kit.registry.add_workflow(my_workflow)
    clock = VirtualClock()
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(my_workflow)
        assert await finish(engine, clock, run, tick=30) == 2
    assert calls["my_step"] == 3


async def test_pyworkflow__schedule_a_workflow_instead_of_a_year_long_sleep(kit: Kit) -> None:
    reviews: list[str] = []

    @workflow(name="pyworkflow.annual_review")
    async def annual_review() -> str:
        reviews.append("reviewed")
        return "reviewed"

    @workflow(name="pyworkflow.long_wait")
    async def long_wait() -> str:
        # Alternative: Schedule a new workflow
        schedule_workflow(annual_review, run_at="2026-01-01")
        return "scheduled"

    kit.registry.add_workflow(annual_review)
    kit.registry.add_workflow(long_wait)
    new_year = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    clock = VirtualClock(new_year - 12 * 3600)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(long_wait)
        assert await run.result(timeout=WAIT) == "scheduled"
        (review,) = await engine.list_runs(workflow="pyworkflow.annual_review")
        record = await engine.control.record(review.run_id)
        assert (record.status, record.wake_at) == ("PENDING", new_year)
        assert record.parent_id == run.run_id
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        clock.advance(12 * 3600)  # the new year: it starts
        assert await finish(engine, clock, await engine.get(review.run_id)) == "reviewed"
        history = await engine.history(run.run_id)
    assert reviews == ["reviewed"]
    assert [(e.kind, e.name, e.result["run_id"]) for e in history] == [
        ("schedule", "pyworkflow.annual_review", review.run_id)
    ]


async def test_pyworkflow__sleep_until_a_moment_already_past(kit: Kit) -> None:
    # The page's own date, read a year later: the sleep is due at once, and its history
    # entry ends when it started, not at the (earlier) wake time.
    @workflow(name="pyworkflow.past")
    async def too_late() -> str:
        await sleep(datetime(2025, 12, 25, 9, 0, 0))
        return "at once"

    kit.registry.add_workflow(too_late)
    clock = VirtualClock(datetime(2026, 11, 30, tzinfo=UTC).timestamp())
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(too_late)
        assert await run.result(timeout=WAIT) == "at once"
        (entry,) = await engine.history(run.run_id)
    assert entry.result == datetime(2025, 12, 25, 9, tzinfo=UTC)  # the wake time asked for
    assert entry.status == "completed"
    assert entry.started_at is not None and entry.finished_at == entry.started_at
