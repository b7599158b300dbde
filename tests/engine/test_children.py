"""Child runs: awaited by their parent, failures as ChildFailed, cancelled with the parent."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.store.programs import runs as run_ops
from cairn.store.records import RunRecord
from cairn.testing import replay

from .kit import WAIT, Gate, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.store.read(run_ops.get_run(run_id))
            if run is not None and run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def test_child__called_workflow_is_a_child_run_awaited_by_its_parent(kit: Kit) -> None:
    seen: list[cairn.RunInfo] = []

    @kit.workflow("children.child")
    async def child(x: int) -> int:
        seen.append(cairn.current_run())
        return x * 2

    @kit.workflow("children.parent")
    async def parent() -> list[int]:
        return [await child(1), await child(2)]

    async with kit.engine() as engine:
        run = await engine.start(parent, run_id="p-1")
        assert await run.result(timeout=WAIT) == [2, 4]
        history = await engine.history("p-1")
        runs = {r.run_id: r for r in await engine.list_runs()}
    child_ids = [h.result["run_id"] for h in history]
    assert [(h.kind, h.name, h.status) for h in history] == [
        ("child", "children.child", "completed"),
        ("child", "children.child", "completed"),
    ]
    assert child_ids == ["p-1/children.child#1", "p-1/children.child#2"]
    for child_id in child_ids:
        assert runs[child_id].parent_id == "p-1"
        assert runs[child_id].status == cairn.RunStatus.COMPLETED
    assert runs["p-1"].parent_id is None
    assert {(info.run_id, info.parent_id) for info in seen} == {(c, "p-1") for c in child_ids}


async def test_start_child__handles_are_awaited_later(kit: Kit) -> None:
    @kit.workflow("children.worker")
    async def worker(name: str) -> str:
        return f"{name} done"

    @kit.workflow("children.fan_out")
    async def fan_out() -> list[Any]:
        first = await cairn.start_child(worker, "a", run_id="child-a")
        second = await cairn.start_child(worker, name="b")
        assert first.run_id == "child-a" and "children.worker" in second.run_id
        return [await second.result(), await first.result(), second.run_id]

    async with kit.engine() as engine:
        run = await engine.start(fan_out, run_id="fan")
        result = await run.result(timeout=WAIT)
        child = await engine.store.read(run_ops.get_run("child-a"))
    assert result == ["b done", "a done", "fan/children.worker#2"]
    assert child is not None and child.parent_id == "fan"


async def test_child__failure_raises_child_failed_with_run_id_and_error(kit: Kit) -> None:
    @kit.step("explode", retries=1)
    def explode() -> None:
        raise KeyError("missing sku")

    @kit.workflow("children.failing")
    async def failing(how: str) -> None:
        if how == "step":
            await explode()
        raise ValueError("bad order")

    @kit.workflow("children.catching")
    async def catching() -> list[Any]:
        caught = []
        for how in ("plain", "step"):
            try:
                await failing(how)
            except cairn.ChildFailed as exc:
                assert isinstance(exc, cairn.RunFailed)
                caught.append([exc.run_id, exc.error_type, exc.error_message])
        return caught

    @kit.workflow("children.uncaught")
    async def uncaught() -> None:
        await failing("plain")

    async with kit.engine() as engine:
        result = await (await engine.start(catching, run_id="c")).result(timeout=WAIT)
        run = await engine.start(uncaught, run_id="u")
        with pytest.raises(cairn.RunFailed) as info:
            await run.result(timeout=WAIT)
        [entry] = await engine.history("u")
    assert result[0] == ["c/children.failing#1", "builtins.ValueError", "bad order"]
    assert result[1][:2] == ["c/children.failing#2", "builtins.KeyError"]
    assert "missing sku" in result[1][2]
    assert info.value.error_type == "cairn.errors.ChildFailed"
    assert "u/children.failing#1" in str(info.value)
    assert (entry.kind, entry.status) == ("child", "failed")


async def test_child__unfinished_children_are_cancelled_when_the_parent_ends(kit: Kit) -> None:
    @kit.workflow("children.waiter")
    async def waiter() -> Any:
        return await cairn.wait_for_event("go")

    @kit.workflow("children.leaver")
    async def leaver() -> str:
        await cairn.start_child(waiter, run_id="attached")
        await cairn.start_child(waiter, run_id="detached", detached=True)
        return "left"

    async with kit.engine() as engine:
        assert await (await engine.start(leaver)).result(timeout=WAIT) == "left"
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get("attached")).result(timeout=WAIT)
        detached = await engine.get("detached")
        await until(engine, "detached", "WAITING")
        await detached.send_event("go", "still here")
        assert await detached.result(timeout=WAIT) == "still here"


async def test_child__a_child_started_by_an_earlier_attempt_is_cancelled_when_the_parent_ends(
    kit: Kit,
) -> None:
    # The attempt that ends the parent did not start the child: it replays its start.
    @kit.workflow("children.early_waiter")
    async def waiter() -> Any:
        return await cairn.wait_for_event("go")

    @kit.workflow("children.parks_then_leaves")
    async def parks_then_leaves() -> str:
        await cairn.start_child(waiter, run_id="early")
        return str(await cairn.wait_for_event("resume"))

    async with kit.engine() as engine:
        run = await engine.start(parks_then_leaves, run_id="ptl")
        await until(engine, "ptl", "WAITING")
        await run.send_event("resume", "left")
        assert await run.result(timeout=WAIT) == "left"
        with pytest.raises(cairn.RunCancelled):
            await (await engine.get("early")).result(timeout=WAIT)


async def test_child__cancelling_the_parent_cancels_its_children(kit: Kit) -> None:
    @kit.workflow("children.sleeper")
    async def sleeper() -> str:
        await cairn.sleep("1h")
        return "woke"

    @kit.workflow("children.waiting_parent")
    async def waiting_parent() -> Any:
        await cairn.start_child(sleeper, run_id="free", detached=True)
        return await sleeper()

    async with kit.engine() as engine:
        run = await engine.start(waiting_parent, run_id="wp")
        await until(engine, "wp/children.sleeper#2", "SLEEPING")
        await until(engine, "wp", "WAITING")
        await run.cancel()
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        await until(engine, "wp/children.sleeper#2", "CANCELLED")
        assert await (await engine.get("free")).status() == cairn.RunStatus.SLEEPING


async def test_child__cancelled_child_raises_child_failed_in_the_parent(kit: Kit) -> None:
    @kit.workflow("children.victim")
    async def victim() -> Any:
        return await cairn.wait_for_event("never")

    @kit.workflow("children.watcher")
    async def watcher() -> str:
        try:
            await victim()
        except cairn.ChildFailed as exc:
            return f"{exc.run_id} {exc}"
        return "finished"

    async with kit.engine() as engine:
        run = await engine.start(watcher, run_id="w")
        await until(engine, "w/children.victim#1", "WAITING")
        await engine.cancel("w/children.victim#1")
        message = await run.result(timeout=WAIT)
    assert message.startswith("w/children.victim#1 ") and "CANCELLED" in message


async def test_gather__steps_and_children_replay_deterministically(kit: Kit) -> None:
    clock = VirtualClock()
    calls: Counter[str] = Counter()

    @kit.step("part")
    async def part(i: int) -> int:
        calls[f"part {i}"] += 1
        await asyncio.sleep(0.001 * (5 - i))  # finish out of order
        return i

    @kit.workflow("children.square")
    async def square(i: int) -> int:
        calls[f"square {i}"] += 1
        return i * i

    @kit.workflow("children.gather")
    async def gathered() -> list[Any]:
        calls["parent"] += 1
        first = await asyncio.gather(part(1), square(2), part(3), square(4), part(5))
        await cairn.sleep("1h")  # unloaded: the wake replays the gather from the journal
        second = await asyncio.gather(part(6), square(7))
        return [*first, *second]

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(gathered)
        await until(engine, run.run_id, "SLEEPING")
        clock.advance(3600)
        assert await run.result(timeout=WAIT) == [1, 4, 3, 16, 5, 6, 49]
        history = await engine.history(run.run_id)
    assert all(n == 1 for key, n in calls.items() if key != "parent")
    assert len(calls) == 8 and calls["parent"] >= 2
    keys = sorted(h.key for h in history)
    assert keys == sorted(
        [f"part#{i}" for i in range(1, 5)]
        + [f"~child:children.square#{i}" for i in range(1, 4)]
        + ["~sleep#1"]
    )


async def test_gather__engine_stops_mid_gather_and_completed_branches_do_not_rerun(
    kit: Kit, gate: Gate
) -> None:
    calls: Counter[str] = Counter()

    @kit.step("quick")
    async def quick(i: int) -> int:
        calls[f"quick {i}"] += 1
        return i

    @kit.step("held")
    async def held() -> str:
        calls["held"] += 1
        return await gate()

    @kit.step("negate")
    async def negate(i: int) -> int:
        calls[f"child {i}"] += 1
        return -i

    @kit.workflow("children.half")
    async def half(i: int) -> int:
        return int(await negate(i))

    @kit.workflow("children.mid_gather")
    async def mid_gather() -> list[Any]:
        return list(await asyncio.gather(quick(1), held(), half(2), quick(3), half(4)))

    first = kit.engine()
    await first.open()
    run = await first.start(mid_gather, run_id="mg")
    await until(first, "mg/children.half#1", "COMPLETED")
    await until(first, "mg/children.half#2", "COMPLETED")
    async with asyncio.timeout(WAIT):
        while not {"quick#1", "quick#2"} <= {h.key for h in await first.history("mg")}:
            await asyncio.sleep(0.005)
    await gate.hold(first)
    async with kit.engine() as second:
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == [
            1,
            "through",
            -2,
            3,
            -4,
        ]
    assert calls == {"quick 1": 1, "quick 3": 1, "child 2": 1, "child 4": 1, "held": 2}


async def test_start_child__an_existing_child_id_returns_that_child(kit: Kit) -> None:
    runs: list[str] = []

    @kit.step("child.work")
    async def work(n: int) -> int:
        runs.append(f"work {n}")
        return n * 10

    @kit.workflow("child.reused")
    async def child(n: int) -> int:
        return int(await work(n))

    @kit.workflow("child.reuser")
    async def parent() -> list[int]:
        first = await cairn.start_child(child, 1, run_id="fixed-child")
        one = await first.result()
        again = await cairn.start_child(child, 2, run_id="fixed-child")  # the same id
        return [one, await again.result()]

    async with kit.engine() as engine:
        run = await engine.start(parent)
        assert await run.result(timeout=WAIT) == [10, 10]
    assert runs == ["work 1"]  # the child's step ran once


async def test_start_child__an_id_held_by_someone_elses_unfinished_run_is_refused(
    kit: Kit,
) -> None:
    @kit.workflow("child.waiter")
    async def waiter() -> Any:
        return await cairn.wait_for_event("never")

    @kit.workflow("child.clash")
    async def clash() -> Any:
        await cairn.start_child(waiter, run_id="taken")

    async with kit.engine() as engine:
        await engine.start(waiter, run_id="taken")
        run = await engine.start(clash)
        with pytest.raises(cairn.RunFailed, match="child run_id 'taken' is taken by an unfinished"):
            await run.result(timeout=WAIT)


async def _parked_without_deadline(engine: cairn.Engine, run_id: str) -> None:
    """Until `run_id` waits with no deadline (its timed wait expired, an untimed one began)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.store.read(run_ops.get_run(run_id))
            if run is not None and run.status == "WAITING" and run.wake_at is None:
                return
            await asyncio.sleep(0.005)


async def test_child_result__timeout_raises_timeout_error_at_a_durable_deadline(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("children.slow")
    async def slow() -> Any:
        return await cairn.wait_for_event("go")

    @kit.workflow("children.impatient")
    async def impatient() -> list[Any]:
        handle = await cairn.start_child(slow, run_id="slow-1")
        try:
            first = await handle.result(timeout="1h")
        except TimeoutError as exc:
            first = f"timed out: {exc}"
        return [first, await handle.result()]  # waiting again after a timeout is allowed

    async with kit.engine(clock=clock) as engine:
        started = clock.now()
        await engine.start(impatient, run_id="imp")
        parked = await until(engine, "imp", "WAITING")
        assert parked.wake_at == pytest.approx(started + 3600)
        await until(engine, "slow-1", "WAITING")
    clock.advance(1800)
    async with kit.engine(clock=clock) as engine:
        # The deadline was recorded at the call: a replay does not start the hour again.
        clock.advance(1800)
        await _parked_without_deadline(engine, "imp")
        assert await (await engine.get("slow-1")).status() == cairn.RunStatus.WAITING
        await engine.send_event("slow-1", "go", "finally")
        result = await (await engine.get("imp")).result(timeout=WAIT)
        history = await engine.history("imp")
    assert result[0].startswith("timed out: ") and "slow-1" in result[0]
    assert result[1] == "finally"
    assert [(h.kind, h.status) for h in history] == [("child", "timeout"), ("child", "completed")]
    replay(history, impatient)  # the offline replay reads the timeout too


async def test_child_result__a_child_done_in_time_returns_its_result(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("children.quick")
    async def quick(x: int) -> int:
        await cairn.sleep("10m")
        return x + 1

    @kit.workflow("children.patient")
    def patient() -> list[Any]:  # a sync workflow: result() blocks
        handle = cairn.start_child(quick, 1)
        try:
            handle.result(timeout="soon")
        except ValueError as exc:
            bad = str(exc)
        return [handle.result(timeout="1h"), handle.result(timeout=0), bad]

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(patient, run_id="pat")
        await until(engine, "pat/children.quick#1", "SLEEPING")
        await until(engine, "pat", "WAITING")
        clock.advance(600)
        result = await run.result(timeout=WAIT)
        [entry] = await engine.history("pat")
    assert result[:2] == [2, 2] and "'soon'" in result[2]
    assert (entry.kind, entry.status) == ("child", "completed")


async def test_child_result__timeout_follows_a_child_through_continue_as_new(kit: Kit) -> None:
    clock = VirtualClock()

    @kit.workflow("children.relay")
    async def relay(leg: int) -> Any:
        if leg == 1:
            cairn.continue_as_new(2)
        return [leg, await cairn.wait_for_event("go")]

    @kit.workflow("children.relay_parent")
    async def relay_parent() -> list[Any]:
        handle = await cairn.start_child(relay, 1, run_id="leg")
        try:
            await handle.result(timeout="5m")
        except TimeoutError:
            pass
        return await handle.result(timeout="1h")

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(relay_parent, run_id="rp")
        second = await until(engine, "leg", "CONTINUED")
        assert second.continued_to is not None
        await until(engine, second.continued_to, "WAITING")
        await until(engine, "rp", "WAITING")
        clock.advance(300)
        await _wait_for_history(engine, "rp", "timeout")
        await engine.send_event(second.continued_to, "go", "there")
        assert await run.result(timeout=WAIT) == [2, "there"]
        history = await engine.history("rp")
    assert [(h.key, h.status) for h in history] == [
        ("~child:children.relay#1", "continued"),
        ("~child:children.relay#1>1", "timeout"),
        ("~child:children.relay#1@2", "completed"),
    ]
    replay(history, relay_parent)


async def _wait_for_history(engine: cairn.Engine, run_id: str, status: str) -> None:
    async with asyncio.timeout(WAIT):
        while not any(h.status == status for h in await engine.history(run_id)):
            await asyncio.sleep(0.005)
