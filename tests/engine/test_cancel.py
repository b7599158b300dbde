"""Cancel: Cancelled at the next durable point, at once when parked; shield; timeouts."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
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


async def test_cancel__running_run_stops_at_its_next_durable_point(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("busy")
    async def busy() -> str:
        calls["busy"] += 1
        entered.set()
        await release.wait()  # a step is never interrupted by a cancel
        return "finished"

    @kit.step("next_one")
    def next_one() -> None:
        calls["next_one"] += 1

    @kit.workflow("cancel.running")
    async def running() -> None:
        await busy()
        await next_one()

    async with kit.engine() as engine:
        run = await engine.start(running)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        assert await run.cancel() == cairn.RunStatus.RUNNING
        release.set()
        with pytest.raises(cairn.RunCancelled) as info:
            await run.result(timeout=WAIT)
        assert await run.status() == cairn.RunStatus.CANCELLED
        entry, delivered = await engine.history(run.run_id)
        [summary] = await engine.list_runs(status="CANCELLED")
    assert info.value.run_id == run.run_id
    assert calls == {"busy": 1}
    assert (entry.key, entry.status, entry.result) == ("busy#1", "completed", "finished")
    # Where the cancellation reached the workflow: at its next durable point.
    assert (delivered.kind, delivered.result["at"]) == ("cancel", "next_one#1")
    assert summary.error is not None and summary.error["type"] == "cairn.errors.Cancelled"


async def test_cancel__during_the_last_step_the_run_that_returns_completes(kit: Kit) -> None:
    """A cancel the workflow never meets (no durable point after it) does not undo its end.

    The request came while the last step ran; the workflow then returned. It completes,
    as documented (howto/control.md), and the CLI's answer says a run may finish first.
    """
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("last")
    async def last() -> str:
        entered.set()
        await release.wait()
        return "done"

    @kit.workflow("cancel.last_step")
    async def only_step() -> str:
        return await last()

    async with kit.engine() as engine:
        run = await engine.start(only_step)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        assert await run.cancel() == cairn.RunStatus.RUNNING
        release.set()
        assert await run.result(timeout=WAIT) == "done"
        assert await run.status() == cairn.RunStatus.COMPLETED


@pytest.mark.parametrize("parked", ["sleep", "event", "memory_sleep", "child"])
async def test_cancel__parked_run_is_cancelled_at_once(kit: Kit, parked: str) -> None:
    @kit.workflow("cancel.child")
    async def child() -> None:
        await cairn.wait_for_event("never")

    @kit.workflow("cancel.parked")
    async def parked_wf(how: str) -> None:
        if how == "sleep":
            await cairn.sleep("30d")
        elif how == "event":
            await cairn.wait_for_event("never")
        elif how == "memory_sleep":
            await cairn.sleep("900ms")  # in memory: interrupted, not waited out
        else:
            await child()

    async with kit.engine() as engine:
        run = await engine.start(parked_wf, parked)
        if parked == "memory_sleep":
            async with asyncio.timeout(WAIT):
                while not await engine.history(run.run_id):
                    await asyncio.sleep(0.005)
        else:
            await until(engine, run.run_id, "SLEEPING", "WAITING")
        loop = asyncio.get_running_loop()
        asked = loop.time()
        await engine.cancel(run.run_id)
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        took = loop.time() - asked
        if parked == "child":
            [child_run] = [r for r in await engine.list_runs() if r.parent_id == run.run_id]
            await until(engine, child_run.run_id, "CANCELLED")
    # At once: before the in-memory sleep's 0.9 s would end and before any look of a
    # second came round (a loaded machine took 0.52 s, so not a tighter bound).
    assert took < 0.85


async def test_cancel__check_cancelled_stops_long_steps(kit: Kit) -> None:
    entered: dict[str, asyncio.Event] = {"async": asyncio.Event(), "sync": asyncio.Event()}
    loop = asyncio.get_running_loop()
    stopped: list[str] = []

    @kit.step("long_async")
    async def long_async() -> None:
        entered["async"].set()
        try:
            while True:
                cairn.check_cancelled()
                await asyncio.sleep(0.002)  # a slice of real work
        except cairn.Cancelled:
            stopped.append("async")
            raise

    @kit.step("long_sync")
    def long_sync() -> None:
        loop.call_soon_threadsafe(entered["sync"].set)
        pause = threading.Event()
        try:
            while True:
                cairn.check_cancelled()
                pause.wait(0.002)  # a slice of real work
        except cairn.Cancelled:
            stopped.append("sync")
            raise

    @kit.workflow("cancel.long")
    async def long_wf(kind: str) -> None:
        await (long_async() if kind == "async" else long_sync())

    async with kit.engine() as engine:
        for kind in ("async", "sync"):
            run = await engine.start(long_wf, kind)
            async with asyncio.timeout(WAIT):
                await entered[kind].wait()
            await run.cancel()
            with pytest.raises(cairn.RunCancelled):
                await run.result(timeout=WAIT)
            history = await engine.history(run.run_id)
            assert [(h.kind, h.result["at"]) for h in history] == [
                ("cancel", f"long_{kind}#1")  # the step stopped: it has no outcome
            ]
            # ... but its attempt is there, ended cancelled, as an interrupted one would be.
            [attempt] = await engine.control.attempts(run.run_id)
            assert (attempt["key"], attempt["attempt"], attempt["outcome"]) == (
                f"long_{kind}#1",
                1,
                "cancelled",
            )
            assert attempt["error_type"] == "cairn.errors.Cancelled"
            assert attempt["message"] == f"step 'long_{kind}' stopped: its run was cancelled"
            assert attempt["retry_at"] is None and attempt["duration"] >= 0
    assert stopped == ["async", "sync"]


async def test_cancel__delivered_once_so_cleanup_may_call_steps(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("cleanup")
    def cleanup(what: str) -> str:
        calls[what] += 1
        return f"cleaned {what}"

    @kit.workflow("cancel.cleanup")
    async def cleans_up() -> None:
        try:
            await cairn.wait_for_event("never")
        except cairn.Cancelled:
            await cleanup("after")  # Cancelled reached the workflow once; this runs
            await cairn.sleep("10ms")
            cairn.check_cancelled()  # delivered already: does not raise again
            raise

    async with kit.engine() as engine:
        run = await engine.start(cleans_up)
        await until(engine, run.run_id, "WAITING")
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert calls == {"after": 1}
    assert [(h.kind, h.status) for h in history] == [
        ("event", "cancelled"),  # the cancel ended the wait (it read "waiting" before)
        ("cancel", "completed"),
        ("step", "completed"),
        ("sleep", "completed"),
    ]


async def test_cancel__shield_holds_it_off_until_the_shielded_code_is_done(kit: Kit) -> None:
    order: list[str] = []

    @kit.step("critical")
    def critical(part: int) -> int:
        order.append(f"critical {part}")
        return part

    @kit.workflow("cancel.shielded")
    async def shielded() -> None:
        try:
            async with cairn.shield():
                await critical(1)
                await cairn.wait_for_event("go")
                await critical(2)  # the cancel came meanwhile: shielded, this still runs
            await critical(3)
        except cairn.Cancelled:
            order.append("cancelled")
            raise

    async with kit.engine() as engine:
        run = await engine.start(shielded)
        await until(engine, run.run_id, "WAITING")
        await run.cancel()
        await run.send_event("go")
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
    assert order == ["critical 1", "critical 2", "cancelled"]


@pytest.mark.parametrize("parked", ["sleep", "event", "memory_sleep", "child", "sync"])
async def test_cancel__a_parked_run_runs_its_finally_cleanup_once(kit: Kit, parked: str) -> None:
    # Issue 12, item 1. Before, a `finally:` cleanup step ran when the run *parked*
    # (its Suspend unwound through the finally), and never at the cancel.
    calls: Counter[str] = Counter()

    @kit.step("undo")
    async def undo(how: str) -> str:
        calls[how] += 1
        return how

    @kit.workflow("cancel.child_waits")
    async def child() -> None:
        await cairn.wait_for_event("never")

    @kit.workflow("cancel.finally")
    async def finally_wf(how: str) -> None:
        try:
            if how == "sleep":
                await cairn.sleep("1h")
            elif how == "event":
                await cairn.wait_for_event("never")
            elif how == "memory_sleep":
                await cairn.sleep("900ms")
            else:
                await child()
        finally:
            await undo(how)

    @kit.workflow("cancel.finally_sync")
    def finally_sync(how: str) -> None:
        try:
            cairn.sleep("1h")
        finally:
            undo(how)

    async with kit.engine() as engine:
        flow = finally_sync if parked == "sync" else finally_wf
        run = await engine.start(flow, parked)
        if parked == "memory_sleep":
            async with asyncio.timeout(WAIT):
                while not await engine.history(run.run_id):
                    await asyncio.sleep(0.005)
        else:
            await until(engine, run.run_id, "SLEEPING", "WAITING")
        parked_calls = dict(calls)
        await engine.cancel(run.run_id)
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert parked_calls == {}  # parking ran no cleanup
    assert calls == {parked: 1}
    assert [h.kind for h in history][-2:] == ["cancel", "step"]


async def test_cancel__a_cancelled_run_never_continues_as_new(kit: Kit) -> None:
    # Issue 12, item 2.
    @kit.workflow("cancel.chain")
    async def chain(n: int) -> None:
        try:
            await cairn.sleep("1h")
        finally:
            cairn.continue_as_new(n + 1)

    async with kit.engine() as engine:
        run = await engine.start(chain, 1)
        await until(engine, run.run_id, "SLEEPING")
        await engine.cancel(run.run_id)
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        stored = await engine.control.record(run.run_id)
        runs = await engine.list_runs()
    assert (stored.status, stored.continued_to) == ("CANCELLED", None)
    assert len(runs) == 1


async def test_cancel__a_replay_delivers_it_where_it_was_delivered(kit: Kit, gate: Gate) -> None:
    # The run is cancelled while it sleeps, its cleanup step is cut off by the engine
    # closing, and it replays an hour later, when the sleep would be over: the replay
    # still raises Cancelled at the sleep (recorded), so it takes the same path.
    calls: Counter[str] = Counter()
    clock = VirtualClock()

    @kit.step("slow_undo")
    async def slow_undo() -> str:
        calls["undo"] += 1
        return await gate()

    @kit.step("after_sleep")
    async def after_sleep() -> None:
        calls["after"] += 1

    @kit.workflow("cancel.replayed")
    async def replayed() -> None:
        try:
            await cairn.sleep("1h")
            await after_sleep()
        except cairn.Cancelled:
            await slow_undo()
            raise

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(replayed)
        await until(engine, run.run_id, "SLEEPING")
        await engine.cancel(run.run_id)
        await gate.hold(engine)
    clock.advance(7200)
    async with kit.engine(clock=clock) as engine:
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get(run.run_id)).result(timeout=WAIT)
        history = await engine.history(run.run_id)
    assert calls == {"undo": 2}  # cut off once, then completed; after_sleep never ran
    assert [h.kind for h in history] == ["sleep", "cancel", "step"]


async def test_cancel__caught_cancellation_still_ends_cancelled(kit: Kit) -> None:
    @kit.workflow("cancel.swallowed")
    async def swallowed() -> str:
        try:
            await cairn.sleep("1h")
        except cairn.Cancelled:
            return "pretended nothing happened"
        return "slept"

    async with kit.engine() as engine:
        run = await engine.start(swallowed)
        await until(engine, run.run_id, "SLEEPING")
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        assert await run.status() == cairn.RunStatus.CANCELLED


async def test_cancel__pending_finished_and_unknown_runs(kit: Kit) -> None:
    @kit.workflow("cancel.simple")
    async def simple() -> str:
        return "done"

    async with kit.engine(workers=0) as queuer:
        pending = await queuer.start(simple)
        assert await queuer.cancel(pending.run_id) == cairn.RunStatus.CANCELLED
        with pytest.raises(cairn.RunNotFound):
            await queuer.cancel("nobody")
        other = await queuer.start(simple)
    async with kit.engine() as engine:
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get(pending.run_id)).result(timeout=WAIT)
        done = await engine.get(other.run_id)
        assert await done.result(timeout=WAIT) == "done"
        assert await done.cancel() == cairn.RunStatus.COMPLETED  # unchanged
        assert await done.result(timeout=WAIT) == "done"


async def test_cancel__sync_workflow(kit: Kit) -> None:
    @kit.workflow("cancel.sync")
    def sync_wf() -> Any:
        try:
            return cairn.wait_for_event("never")
        finally:
            with cairn.shield():
                cairn.sleep(0)

    async with kit.engine() as engine:
        run = await engine.start(sync_wf)
        await until(engine, run.run_id, "WAITING")
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)


async def test_workflow_timeout__cancels_the_run(kit: Kit) -> None:
    calls: Counter[str] = Counter()

    @kit.step("tidy")
    def tidy() -> None:
        calls["tidy"] += 1

    @kit.workflow("cancel.timeout", timeout="300ms")
    async def timed() -> None:
        try:
            await cairn.wait_for_event("never")
        finally:
            async with cairn.shield():
                await tidy()

    @kit.workflow("cancel.in_time", timeout="1h")
    async def in_time() -> str:
        await cairn.sleep("10ms")
        return "made it"

    async with kit.engine() as engine:
        run = await engine.start(timed)
        fine = await engine.start(in_time)
        parked = await until(engine, run.run_id, "WAITING")
        assert parked.wake_at is not None  # the deadline is a timer like any other
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        [summary] = await engine.list_runs(status="CANCELLED")
        assert await fine.result(timeout=WAIT) == "made it"
    assert calls == {"tidy": 1}
    assert summary.error is not None and "timeout" in summary.error["message"]


async def test_cancel__check_cancelled_in_workflow_code(kit: Kit) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("work")
    async def work() -> None:
        entered.set()
        await release.wait()

    @kit.workflow("cancel.checked")
    async def checked() -> str:
        await work()
        cairn.check_cancelled()  # no durable point follows: only this notices the cancel
        return "finished"

    async with kit.engine() as engine:
        run = await engine.start(checked)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        await run.cancel()
        release.set()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
    with pytest.raises(cairn.NotInRun, match="check_cancelled"):
        cairn.check_cancelled()


async def test_cancel__from_another_process_as_the_run_parks_is_not_lost(kit: Kit) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @kit.step("work")
    async def work() -> None:
        entered.set()
        await release.wait()

    @kit.workflow("cancel.parking")
    async def parking() -> None:
        await work()
        await cairn.wait_for_event("never")

    # The executing engine looks for requests made elsewhere only once a minute: the cancel
    # is in the database, unseen, when the run decides to wait.
    async with kit.engine(poll_interval=60) as engine, kit.engine(workers=0) as elsewhere:
        run = await engine.start(parking)
        async with asyncio.timeout(WAIT):
            await entered.wait()
        assert await elsewhere.cancel(run.run_id) == cairn.RunStatus.RUNNING
        release.set()
        async with asyncio.timeout(WAIT):
            while (parked := await elsewhere.control.record(run.run_id)).owner is not None:
                await asyncio.sleep(0.005)
        if parked.status == "WAITING":  # the worker had not seen it (a store may notify it)
            assert parked.control == "cancel"  # kept, and due at once
            assert parked.wake_at is not None and parked.wake_at <= time.time()
        assert engine.worker is not None
        engine.worker.wake()  # stands for the next poll
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
