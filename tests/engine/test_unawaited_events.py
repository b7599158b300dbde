"""A run wakes only for a message its current waits take; others are kept for later.

Before, any event woke a waiting run: one sent under a name it did not wait for (a typo,
or an event while it waited for a task, hook or child) made it replay and park again
without end. Wake-ups are counted here by the run's fence (bumped by every claim) and by
how often the workflow's code ran.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.models import SPINNING_AFTER
from cairn.observability import Metrics
from cairn.store.programs.base import Program, Sql
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(
    engine: cairn.Engine, run_id: str, *statuses: str, fence_above: int = -1
) -> RunRecord:
    """The stored run once parked in one of `statuses` (after claim `fence_above`)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses and run.owner is None and run.fence > fence_above:
                return run
            await asyncio.sleep(0.005)


def make_due(run_id: str) -> Program[None]:
    """Make a parked run due now, as nothing in cairn should without a reason."""
    yield Sql("UPDATE runs SET wake_at = ? WHERE run_id = ?", (time.time(), run_id))


async def test_send_event__a_name_the_run_does_not_wait_for_neither_wakes_it_nor_is_lost(
    kit: Kit,
) -> None:
    runs: Counter[str] = Counter()

    @kit.workflow("unawaited.typo")
    async def approve() -> list[Any]:
        runs["code"] += 1
        return [await cairn.wait_for_event("approval"), await cairn.wait_for_event("aproval")]

    async with kit.engine() as engine:
        assert engine.worker is not None
        run = await engine.start(approve)
        parked = await until(engine, run.run_id, "WAITING")
        before = runs["code"]

        sent = await run.send_event("aproval", "typo")

        assert (sent.run_id, sent.event, sent.status) == (run.run_id, "aproval", "WAITING")
        assert (sent.awaited, sent.waits_for) == (False, ("event 'approval'",))
        assert sent.note == (
            f"run {run.run_id} is not waiting for event 'aproval' (it waits for event "
            "'approval'); the event is kept for a later wait"
        )
        still = await engine.control.record(run.run_id)
        assert (still.status, still.wake_at, still.fence) == ("WAITING", None, parked.fence)
        assert await engine.worker.claim_once() == 0  # nothing is due

        right = await run.send_event("approval", "ok")
        assert (right.awaited, right.note) == (True, None)
        # The kept event is taken by the later wait, without another wake-up.
        assert await run.result(timeout=WAIT) == ["ok", "typo"]
        done = await engine.control.record(run.run_id)
    assert runs["code"] == before + 1  # woken once: by the event it waited for
    assert done.fence == parked.fence + 1


@pytest.mark.parametrize("waits_on", ["task", "hook"])
async def test_send_event__while_a_task_or_hook_is_awaited_is_kept_for_a_later_wait(
    kit: Kit, waits_on: str
) -> None:
    runs: Counter[str] = Counter()

    @kit.workflow("unawaited.later")
    async def later() -> list[Any]:
        runs["code"] += 1
        if waits_on == "task":
            first = await cairn.human_task("review", title="Review")
        else:
            hook = await cairn.create_hook("callback")
            cairn.set_columns(token=hook.token)
            first = await hook
        return [first, await cairn.wait_for_event("note")]

    async with kit.engine() as engine:
        run = await engine.start(later)
        parked = await until(engine, run.run_id, "WAITING")
        before = runs["code"]

        sent = await run.send_event("note", "early")

        assert not sent.awaited
        [waits] = sent.waits_for
        assert waits.startswith("human task " if waits_on == "task" else "a hook call")
        still = await engine.control.record(run.run_id)
        assert (still.wake_at, still.fence) == (None, parked.fence)
        if waits_on == "task":
            [task] = await engine.tasks.list(run_id=run.run_id)
            await engine.tasks.submit(task.task_id, {"ok": True})
        else:
            summary = await run.describe()
            await engine.resume_hook(summary.columns["token"], {"ok": True})
        assert await run.result(timeout=WAIT) == [{"ok": True}, "early"]
    assert runs["code"] == before + 1


async def test_child__ending_while_its_parent_waits_for_an_event_does_not_wake_it(
    kit: Kit,
) -> None:
    runs: Counter[str] = Counter()

    @kit.workflow("unawaited.child")
    async def child() -> str:
        return "from the child"

    @kit.workflow("unawaited.parent")
    async def parent() -> list[Any]:
        runs["code"] += 1
        handle = await cairn.start_child(child)
        go = await cairn.wait_for_event("go")
        return [go, await handle.result()]

    async with kit.engine() as engine:
        run = await engine.start(parent)
        parked = await until(engine, run.run_id, "WAITING")
        [kid] = [r for r in await engine.list_runs() if r.run_id != run.run_id]
        await until(engine, kid.run_id, "COMPLETED")
        before = runs["code"]

        still = await engine.control.record(run.run_id)
        assert (still.wake_at, still.fence) == (None, parked.fence)
        await run.send_event("go", "went")
        assert await run.result(timeout=WAIT) == ["went", "from the child"]
    assert runs["code"] == before + 1


async def test_gather__a_run_waiting_on_two_events_wakes_for_either(kit: Kit) -> None:
    @kit.workflow("unawaited.gather")
    async def both() -> list[Any]:
        return list(
            await asyncio.gather(cairn.wait_for_event("left"), cairn.wait_for_event("right"))
        )

    async with kit.engine() as engine:
        run = await engine.start(both)
        parked = await until(engine, run.run_id, "WAITING")
        assert parked.waits_on is not None
        assert sorted(json.loads(parked.waits_on)) == ["event:left", "event:right"]

        right = await run.send_event("right", "R")
        again = await until(engine, run.run_id, "WAITING", fence_above=parked.fence)
        left = await run.send_event("left", "L")

        assert (right.awaited, left.awaited) == (True, True)
        assert left.waits_for == ("event 'left'",)  # what is left to take
        assert await run.result(timeout=WAIT) == ["L", "R"]
    assert again.fence == parked.fence + 1


async def test_gather__a_run_waiting_on_two_timeouts_wakes_at_the_first(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("unawaited.deadlines")
    async def deadlines() -> list[Any]:
        return list(
            await asyncio.gather(
                cairn.wait_for_event("slow", timeout="1h", default="slow timed out"),
                cairn.wait_for_event("fast", timeout="10s", default="fast timed out"),
            )
        )

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(deadlines)
        parked = await until(engine, run.run_id, "WAITING")
        assert parked.wake_at == pytest.approx(started + 10)  # not an hour
        clock.advance(10)
        again = await until(engine, run.run_id, "WAITING", fence_above=parked.fence)
        assert again.wake_at == pytest.approx(started + 3600)
        await run.send_event("slow", "S")
        assert await run.result(timeout=WAIT) == ["S", "fast timed out"]


async def test_gather__a_sleep_beside_a_wait_still_ends_on_time(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("unawaited.sleep_and_wait")
    async def nap_and_wait() -> list[Any]:
        async def nap() -> str:
            await cairn.sleep("30s")
            return "rested"

        return list(await asyncio.gather(nap(), cairn.wait_for_event("go")))

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        run = await engine.start(nap_and_wait)
        parked = await until(engine, run.run_id, "WAITING", "SLEEPING")
        # Whichever branch parked the run first, it wakes at the sleep's end and for "go".
        assert parked.wake_at == pytest.approx(started + 30)
        sent = await run.send_event("go", "went")
        assert sent.awaited
        clock.advance(30)
        assert await run.result(timeout=WAIT) == ["rested", "went"]


async def test_send_event__from_another_process_wakes_the_run_at_once(kit: Kit) -> None:
    @kit.workflow("unawaited.remote")
    async def remote() -> Any:
        return await cairn.wait_for_event("approval")

    # The worker polls once a minute: only the store's wake-up (LISTEN/NOTIFY on
    # PostgreSQL, the data version on SQLite) can finish the run in time.
    async with kit.engine(poll_interval=60) as engine, kit.engine(workers=0) as sender:
        run = await engine.start(remote)
        await until(engine, run.run_id, "WAITING")
        sent = await sender.send_event(run.run_id, "approval", "yes")
        assert sent.awaited
        assert await run.result(timeout=WAIT) == "yes"


async def test_futile_wakes__a_run_that_keeps_waking_without_progress_is_flagged(
    kit: Kit,
) -> None:
    @kit.workflow("unawaited.spinner")
    async def spinner() -> list[Any]:
        return [await cairn.wait_for_event("a"), await cairn.wait_for_event("b")]

    metrics = Metrics()
    async with kit.engine(metrics=metrics) as engine:
        run = await engine.start(spinner)
        parked = await until(engine, run.run_id, "WAITING")
        # Provoke it: make the run due again and again with nothing for its wait.
        for _ in range(SPINNING_AFTER + 1):
            await engine.store.write(lambda: make_due(run.run_id))
            parked = await until(engine, run.run_id, "WAITING", fence_above=parked.fence)
        summary = await run.describe()
        counted = metrics.registry.get_sample_value(
            "cairn_futile_wakes_total", {"workflow": "unawaited.spinner"}
        )
        await metrics.counts()  # the gauges' read of the database, as a scrape makes it
        spinning = metrics.registry.get_sample_value("cairn_runs_spinning")

        assert parked.futile_wakes == SPINNING_AFTER + 1
        assert summary.spinning
        assert summary.waiting_for is not None
        assert summary.waiting_for.startswith(
            f"keeps waking without progress ({SPINNING_AFTER + 1} times in the minute to "
        )
        assert summary.waiting_for.endswith("; event 'a'")
        assert counted == SPINNING_AFTER + 1
        assert spinning == 1

        await run.send_event("a", 1)  # progress: the flag goes
        moved = await until(engine, run.run_id, "WAITING", fence_above=parked.fence)
        assert moved.futile_wakes == 0
        assert (await run.describe()).waiting_for == "event 'b'"
        await run.send_event("b", 2)
        assert await run.result(timeout=WAIT) == [1, 2]
