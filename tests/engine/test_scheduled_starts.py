"""cairn.schedule_workflow: a durable start of a detached run, now, at run_at or after delay.

The start takes effect whether the workflow awaits it or not, is recorded once (a replay
returns the same id and starts nothing), and the run it starts is PENDING until its time.
On both stores, on a virtual clock.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.testing import replay

from .kit import WAIT, Kit
from .seeds import FINISHED, finish, until

START = datetime(2025, 6, 1, tzinfo=UTC).timestamp()


def later(kit: Kit, ran: Counter[str]) -> Any:
    @kit.workflow("scheduled.later")
    async def report(label: str) -> str:
        ran[label] += 1
        return f"report {label}"

    return report


async def runs_of(engine: cairn.Engine, workflow: str) -> list[cairn.RunSummary]:
    return list(await engine.list_runs(workflow=workflow))


async def test_schedule_workflow__awaited_returns_the_id_and_a_replay_starts_nothing_again(
    kit: Kit,
) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)
    code: Counter[str] = Counter()

    @kit.workflow("scheduled.parent")
    async def parent() -> list[str]:
        code["parent"] += 1
        first = await cairn.schedule_workflow(report, "a", delay="1h")
        cairn.schedule_workflow(report, "b", run_at=datetime(2025, 6, 1, 2))  # not awaited
        await cairn.sleep("10m")  # parks: the un-awaited start is written first
        again = await cairn.schedule_workflow(report, "c", delay=timedelta(hours=3))
        return [first, again]

    clock = VirtualClock(START)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(parent)
        parked = await until(engine, run.run_id, "SLEEPING")
        scheduled = await runs_of(engine, "scheduled.later")
        assert sorted(r.status for r in scheduled) == ["PENDING", "PENDING"]
        first, again = await finish(engine, clock, run, tick=60)
        assert code["parent"] == 2  # replayed once, after the sleep
        assert (first, again) == (
            f"{run.run_id}/schedule:scheduled.later#1",
            f"{run.run_id}/schedule:scheduled.later#3",
        )
        records = {r.run_id: await engine.control.record(r.run_id) for r in scheduled}
        history = await engine.history(run.run_id)
        assert len(await runs_of(engine, "scheduled.later")) == 3  # none started twice
    assert parked.wake_at == pytest.approx(START + 600)
    assert sorted((r.wake_at, r.parent_id, r.detached) for r in records.values()) == [
        (START + 3600, run.run_id, 1),
        (datetime(2025, 6, 1, 2, tzinfo=UTC).timestamp(), run.run_id, 1),
    ]
    assert [(e.kind, e.name, e.status) for e in history] == [
        ("schedule", "scheduled.later", "completed"),
        ("schedule", "scheduled.later", "completed"),
        ("sleep", "sleep", "completed"),
        ("schedule", "scheduled.later", "completed"),
    ]
    assert history[1].result == {
        "run_id": f"{run.run_id}/schedule:scheduled.later#2",
        "workflow": "scheduled.later",
        "run_at": "2025-06-01T02:00:00+00:00",
    }
    assert history[1].input == {"args": ["b"], "kwargs": {}}
    replay(history, parent)  # the offline replay (cairn check --db) takes it too
    assert ran == Counter()  # none is due yet


async def test_schedule_workflow__the_run_starts_at_its_time_and_outlives_a_cancel(
    kit: Kit,
) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)

    @kit.workflow("scheduled.waits")
    async def waits() -> str:
        cairn.schedule_workflow(report, "x", delay="2h")
        return str(await cairn.wait_for_event("never"))

    clock = VirtualClock(START)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(waits)
        await until(engine, run.run_id, "WAITING")
        await run.cancel()
        await until(engine, run.run_id, "CANCELLED")
        (scheduled,) = await runs_of(engine, "scheduled.later")
        assert scheduled.status == cairn.RunStatus.PENDING  # detached: not cancelled
        assert engine.worker is not None and await engine.worker.claim_once() == 0
        clock.advance(2 * 3600 - 1)
        assert await engine.worker.claim_once() == 0
        clock.advance(1)
        handle = await engine.get(scheduled.run_id)
        assert await finish(engine, clock, handle) == "report x"
    assert ran == Counter({"x": 1})


async def test_schedule_workflow__written_before_the_run_fails_or_continues_as_new(
    kit: Kit,
) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)

    @kit.workflow("scheduled.fails")
    async def fails() -> None:
        cairn.schedule_workflow(report, "f")
        raise cairn.FatalError("gave up")

    @kit.workflow("scheduled.goes_on")
    async def goes_on(round: int) -> int:
        cairn.schedule_workflow(report, f"round {round}")
        if round < 2:
            cairn.continue_as_new(round + 1)
        return round

    async with kit.engine() as engine:
        failed = await engine.start(fails)
        with pytest.raises(cairn.RunFailed, match="gave up"):
            await failed.result(timeout=WAIT)
        chain = await engine.start(goes_on, 0)
        async with asyncio.timeout(WAIT):
            while sum(ran.values()) < 4:
                await asyncio.sleep(0.01)
    assert ran == Counter({"f": 1, "round 0": 1, "round 1": 1, "round 2": 1})
    assert chain.run_id


async def test_schedule_workflow__a_sync_workflow_gets_the_id(kit: Kit) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)

    @kit.workflow("scheduled.sync")
    def plain() -> str:
        run_id = cairn.schedule_workflow(report, "s")
        assert isinstance(run_id, str)
        return run_id

    async with kit.engine() as engine:
        run = await engine.start(plain)
        run_id = await run.result(timeout=WAIT)
        done = await (await engine.get(run_id)).result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert (run_id, done) == (f"{run.run_id}/schedule:scheduled.later#1", "report s")
    assert [e.kind for e in history] == ["schedule"]
    replay(history, plain)


async def test_schedule_workflow__bad_times_and_calls_are_named(kit: Kit) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)

    @kit.step("in_a_step")
    async def in_a_step() -> str:
        try:
            cairn.schedule_workflow(report, "z")
        except cairn.NotInRun as exc:
            return str(exc)
        return "no error"

    @kit.workflow("scheduled.bad")
    async def bad() -> list[str]:
        errors = []
        for attempt in (
            lambda: cairn.schedule_workflow(report, "z", run_at="next year"),
            lambda: cairn.schedule_workflow(report, "z", run_at="2026-01-01", delay="1d"),
            lambda: cairn.schedule_workflow(report, "z", delay="1 month"),
            lambda: cairn.schedule_workflow(report, run_at="2026-01-01"),
            lambda: cairn.schedule_workflow(len, "z"),
        ):
            try:
                attempt()
            except (TypeError, ValueError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        errors.append(await in_a_step())
        return errors

    async with kit.engine() as engine:
        errors = await (await engine.start(bad)).result(timeout=WAIT)
        history = await engine.history((await engine.list_runs(workflow="scheduled.bad"))[0].run_id)
        assert await runs_of(engine, "scheduled.later") == []  # nothing started
    with pytest.raises(cairn.NotInRun, match=r"await engine\.start\(workflow, run_at=\.\.\.\)"):
        cairn.schedule_workflow(report, "z", run_at="2026-01-01")
    with pytest.raises(ValueError, match="run_at is not an ISO 8601 date or date-time"):
        cairn.schedule_workflow(report, "z", run_at="2026-02-30")
    assert errors == [
        "InvalidValue: run_at is not an ISO 8601 date or date-time: 'next year' (e.g. "
        '"2026-01-01", "2026-01-01T09:30:00" or "2026-01-01T09:30:00+01:00")',
        "InvalidValue: cairn.schedule_workflow got both delay= and run_at=; give one",
        "InvalidValue: invalid duration for start delay: '1 month' (months and years vary in "
        'length: use days, e.g. "30 days", or sleep_until a date)',
        "InvalidArguments: arguments do not fit workflow 'scheduled.later' (label: str): "
        "missing a required argument: 'label'",
        "InvalidArguments: cairn.schedule_workflow needs a @cairn.workflow, "
        "got <built-in function len>",
        "cairn.schedule_workflow() cannot be called inside step 'in_a_step': a step runs once "
        "and is not replayed; call it from the workflow",
    ]
    assert [e.kind for e in history] == ["step"]


async def test_engine_start__run_at_takes_a_date_or_iso_text(kit: Kit) -> None:
    @kit.workflow("scheduled.iso")
    async def iso() -> str:
        return "done"

    clock = VirtualClock(START)
    async with kit.engine(clock=clock) as engine:
        wakes = []
        for value in (
            "2026-01-01",
            "2026-01-01T09:30:00",
            "2026-01-01T09:30:00+01:00",
            "2026-01-01T09:30Z",
            datetime(2026, 1, 1).date(),
        ):
            run = await engine.start(iso, run_at=value)
            wakes.append((await engine.control.record(run.run_id)).wake_at)
        with pytest.raises(ValueError, match="run_at is not an ISO 8601 date or date-time: '1h'"):
            await engine.start(iso, run_at="1h")
    midnight = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert wakes == [midnight, midnight + 34200, midnight + 30600, midnight + 34200, midnight]


async def test_schedule_workflow__not_awaited_beside_a_gather_being_replayed(kit: Kit) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)
    calls: Counter[str] = Counter()

    @kit.step()
    async def tick(n: int) -> int:
        calls[str(n)] += 1
        return n

    @kit.workflow("scheduled.gather")
    async def branches() -> list[Any]:
        async def branch(n: int) -> int:
            value = await tick(n)
            if n == 1:
                cairn.schedule_workflow(report, "from branch 1", delay="1d")
            return value

        found = await asyncio.gather(branch(1), branch(2))
        await cairn.sleep("1m")
        return list(found)

    clock = VirtualClock(START)
    async with kit.engine(clock=clock) as engine:
        run = await engine.start(branches)
        assert await finish(engine, clock, run, tick=30) == [1, 2]
        assert len(await runs_of(engine, "scheduled.later")) == 1
        record = await engine.control.record(run.run_id)
    assert record.status in FINISHED and calls == Counter({"1": 1, "2": 1})


async def test_schedule_workflow__refused_where_the_run_would_be_lost(kit: Kit) -> None:
    ran: Counter[str] = Counter()
    report = later(kit, ran)

    @kit.workflow("scheduled.fleeting", durable=False)
    async def fleeting(label: str) -> str:
        return label

    @kit.workflow("scheduled.from_transient", durable=False)
    async def from_transient() -> str:
        try:
            cairn.schedule_workflow(report, "t", delay="1h")
        except cairn.TransientWorkflow as exc:
            return str(exc)
        return "scheduled"

    @kit.workflow("scheduled.of_transient")
    async def of_transient() -> str:
        try:
            await cairn.schedule_workflow(fleeting, "t")
        except cairn.TransientWorkflow as exc:
            return str(exc)
        return "scheduled"

    async with kit.engine() as engine:
        refused = await (await engine.start(from_transient)).result(timeout=WAIT)
        lost = await (await engine.start(of_transient)).result(timeout=WAIT)
        assert await runs_of(engine, "scheduled.later") == []
    assert "'scheduled.from_transient' is transient (durable=False)" in refused
    assert "it cannot schedule runs" in refused
    assert "'scheduled.fleeting' is transient (durable=False)" in lost
    assert "a durable run cannot schedule it" in lost
