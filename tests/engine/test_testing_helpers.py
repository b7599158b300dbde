"""cairn.testing: TestEngine (virtual clock, crash injection, recovery) and replay()."""

from __future__ import annotations

import asyncio

import pytest

import cairn
from cairn.testing import TestEngine, replay

calls: dict[str, int] = {"fetch": 0, "ship": 0}


@cairn.step(name="testing.fetch")
async def fetch(order: str) -> str:
    calls["fetch"] += 1
    return f"{order}-fetched"


@cairn.step(name="testing.ship")
async def ship(order: str) -> str:
    calls["ship"] += 1
    return f"{order}-shipped"


@cairn.workflow(name="testing.order")
async def order_flow(order: str) -> list[str]:
    fetched = await fetch(order)
    await cairn.sleep("1h")
    return [fetched, await ship(order)]


@cairn.workflow(name="testing.order_changed")
async def order_changed(order: str) -> list[str]:
    return [await ship(order)]


@pytest.fixture(autouse=True)
def reset_calls() -> None:
    calls.update(fetch=0, ship=0)


async def test_advance__completes_a_sleep_of_an_hour_at_once() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-1")
        await env.settle()
        assert await run.status() == cairn.RunStatus.SLEEPING
        await env.advance("59m")
        assert await run.status() == cairn.RunStatus.SLEEPING
        await env.advance("1m")
        assert await run.result(timeout=5) == ["o-1-fetched", "o-1-shipped"]


async def test_crash_after_step__recover_does_not_repeat_the_step() -> None:
    async with TestEngine() as env:
        env.crash_after_step("testing.fetch")
        run = await env.start(order_flow, "o-2")
        await env.settle()
        assert await run.status() == cairn.RunStatus.RUNNING  # left by the "dead" engine
        await env.recover()
        await env.advance("1h")
        assert await run.result(timeout=5) == ["o-2-fetched", "o-2-shipped"]
    assert calls == {"fetch": 1, "ship": 1}


async def test_replay__matching_code_passes_and_changed_code_fails() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-3")
        await env.advance("1h")
        await run.result(timeout=5)
        history = await env.history(run.run_id)
    before = dict(calls)
    replay(history, order_flow)
    assert calls == before  # replay never calls step code
    with pytest.raises(cairn.NonDeterminismError, match=r"testing\.fetch#1"):
        replay(history, order_changed)


async def test_replay__stops_quietly_where_a_history_in_flight_ends() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-4")
        await env.settle()
        history = await env.history(run.run_id)
    replay(history, order_flow)


flaky_calls: list[float] = []


@cairn.step(name="testing.flaky", retries=5)
async def flaky() -> str:
    flaky_calls.append(cairn.current_run().attempt)
    if len(flaky_calls) < 3:
        raise cairn.RetryableError("not yet", retry_after="10s")
    return "finally"


@cairn.workflow(name="testing.flaky_flow")
async def flaky_flow() -> str:
    return await flaky()


@cairn.workflow(name="testing.sleepy")
async def sleepy() -> list[str]:
    done = []
    for label in ("a", "b", "c"):
        await cairn.sleep("10s")
        done.append(label)
    return done


async def test_advance__fires_retry_backoffs_that_come_due_one_after_another() -> None:
    flaky_calls.clear()
    async with TestEngine() as env:
        run = await env.start(flaky_flow)
        await env.advance("30s")  # two 10 s backoffs, each parking the run
        assert await run.status() == cairn.RunStatus.COMPLETED
        assert await run.result(timeout=5) == "finally"
    assert len(flaky_calls) == 3


async def test_advance__runs_each_sleep_at_its_own_time_within_the_window() -> None:
    async with TestEngine() as env:
        started = env.clock.now()
        run = await env.start(sleepy)
        await env.advance("25s")
        assert await run.status() == cairn.RunStatus.SLEEPING  # the third is due at 30 s
        assert env.clock.now() == started + 25
        [*_, last] = await env.history(run.run_id)
        assert last.kind == "sleep" and last.started_at is not None
        assert last.started_at.timestamp() == pytest.approx(started + 20)  # not at 25 s
        await env.advance("5s")
        assert await run.result(timeout=5) == ["a", "b", "c"]


short_calls: list[int] = []


@cairn.step(name="testing.short_backoff", retries=5)
async def short_backoff() -> int:
    short_calls.append(1)
    if len(short_calls) < 3:
        raise cairn.RetryableError("not yet", retry_after="500ms")  # waited out in memory
    return len(short_calls)


@cairn.workflow(name="testing.short_flow")
async def short_flow() -> int:
    return await short_backoff()


async def test_advance__a_backoff_waited_out_in_memory_does_not_stall_it() -> None:
    short_calls.clear()
    async with TestEngine() as env:
        run = await env.start(short_flow)
        # Each settle used to wait its whole real-time limit (10 s) for the run in its
        # backoff to park, which it never does.
        async with asyncio.timeout(5):
            await env.advance("2s")
        assert await run.result(timeout=5) == 3


async def test_test_engine__forwards_the_rest_of_the_engine_surface() -> None:
    async with TestEngine() as env:
        run = await env.start(order_flow, "o-9")
        await env.advance("1h")
        await run.result(timeout=5)
        restarted = await env.restart(run.run_id)
        [*_, ship_entry] = await env.history(run.run_id)
        forked = await env.fork(run.run_id, from_step=ship_entry.seq)
        await env.advance("1h")
        assert await restarted.result(timeout=5) == ["o-9-fetched", "o-9-shipped"]
        assert await forked.result(timeout=5) == ["o-9-fetched", "o-9-shipped"]
        assert await env.emit("testing.nobody_listens", {}) == []
        await env.queues.update("testing.q", concurrency=2)
        queue = await env.queues.get("testing.q")  # others: declared by other test modules
        assert queue is not None and queue.concurrency == 2
        created = await env.schedules.create("testing.hourly", order_flow, every="1h", args=["s"])
        assert created.id in [s.id for s in await env.schedules.list()]
        await env.recover()  # the surface follows the new engine
        await env.advance("1h")  # the tick falls due within the hour
        ticked = [r.run_id for r in await env.list_runs(workflow="testing.order")]
        assert any(run_id.startswith("sched:testing.hourly:") for run_id in ticked)
        with pytest.raises(AttributeError, match="TestEngine has no attribute 'no_such'"):
            env.no_such  # noqa: B018


async def test_restart_and_fork__through_the_test_engine() -> None:
    async with TestEngine() as env:
        run = await env.start(order_changed, "o-9", run_id="o-9")
        assert await run.result(timeout=5) == ["o-9-shipped"]
        restarted = await env.restart("o-9", by="ada")
        assert await restarted.result(timeout=5) == ["o-9-shipped"]
        forked = await env.fork("o-9", 1, by="ada")
        assert await forked.result(timeout=5) == ["o-9-shipped"]
        assert calls["ship"] == 3  # the fork from entry 1 ran the step anew
        assert len({"o-9", restarted.run_id, forked.run_id}) == 3
        with pytest.raises(cairn.RunNotFound):
            await env.restart("nobody")


async def test_crash_after_step__a_step_function_names_its_step() -> None:
    async with TestEngine() as env:
        env.crash_after_step(fetch)  # the decorated function: its step is "testing.fetch"
        run = await env.start(order_flow, "o-7")
        await env.settle()
        assert await run.status() == cairn.RunStatus.RUNNING  # left by the "dead" engine
        await env.recover()
        await env.advance("1h")
        assert await run.result(timeout=5) == ["o-7-fetched", "o-7-shipped"]
    assert calls == {"fetch": 1, "ship": 1}


async def test_crash_after_step__a_name_that_never_committed_fails_recover() -> None:
    # The function's name, not its step's: no crash happens, so a test that goes on to
    # recover() would check nothing. recover() says so, naming the steps that committed.
    async with TestEngine() as env:
        env.crash_after_step("fetch")
        run = await env.start(order_flow, "o-8")
        await env.settle()
        assert await run.status() == cairn.RunStatus.SLEEPING  # nothing crashed
        with pytest.raises(
            ValueError,
            match=r"^crash_after_step\('fetch'\) never fired: no step of that name committed "
            r"\(steps committed: 'testing\.fetch'\)$",
        ):
            await env.recover()


@pytest.mark.parametrize("bad", ["", 3, None])
def test_crash_after_step__bad_input(bad: object) -> None:
    env = TestEngine()
    with pytest.raises((TypeError, ValueError), match=r"^crash_after_step: expected a step name"):
        env.crash_after_step(bad)  # type: ignore[arg-type]
