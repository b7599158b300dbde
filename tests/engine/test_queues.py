"""Queues: concurrency, rate, priority, dedup and limits changed while workers run."""

from __future__ import annotations

import asyncio
import time

import pytest
from tests.engine.kit import WAIT, Kit

import cairn


async def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_concurrency__never_exceeded(kit: Kit) -> None:
    running = {"now": 0, "peak": 0}

    @kit.step("q.work")
    async def work(i: int) -> int:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.03)
        running["now"] -= 1
        return i

    @kit.workflow("q.conc", queue="q-conc")
    async def flow(i: int) -> int:
        return await work(i)

    async with kit.engine() as engine:
        await engine.queues.update("q-conc", concurrency=2)
        runs = [await engine.start(flow, i) for i in range(10)]
        assert [await r.result(timeout=WAIT) for r in runs] == list(range(10))
    assert running["peak"] == 2


async def test_rate__starts_spread_over_the_window(kit: Kit) -> None:
    starts: list[float] = []

    @kit.workflow("q.rated", queue="q-rate")
    async def rated() -> None:
        starts.append(time.monotonic())

    async with kit.engine() as engine:
        await engine.queues.update("q-rate", rate="3/1s")
        runs = [await engine.start(rated) for _ in range(7)]
        for run in runs:
            await run.result(timeout=WAIT)
    starts.sort()
    assert len(starts) == 7
    for first, fourth in zip(starts, starts[3:], strict=False):
        assert fourth - first >= 0.9  # at most 3 starts in any second


async def test_priority__lower_runs_first(kit: Kit) -> None:
    order: list[str] = []
    release = asyncio.Event()

    @kit.step("q.hold")
    async def hold() -> None:
        await release.wait()

    @kit.workflow("q.blocker", queue="q-prio")
    async def blocker() -> None:
        await hold()

    @kit.workflow("q.ranked", queue="q-prio")
    async def ranked(label: str) -> None:
        order.append(label)

    async with kit.engine() as engine:
        await engine.queues.update("q-prio", concurrency=1)
        first = await engine.start(blocker)

        async def blocker_running() -> bool:
            return await first.status() == cairn.RunStatus.RUNNING

        await _until(blocker_running, "the blocker to run")
        runs = [await engine.start(ranked, f"p{p}", priority=p) for p in (5, 1, 3)]
        release.set()
        for run in [first, *runs]:
            await run.result(timeout=WAIT)
    assert order == ["p1", "p3", "p5"]


async def test_dedup__second_active_start_is_refused_naming_the_holder(kit: Kit) -> None:
    release = asyncio.Event()

    @kit.workflow("q.dedup", queue="q-dedup")
    async def once() -> str:
        await release.wait()
        return "done"

    async with kit.engine() as engine:
        first = await engine.start(once, dedup_key="order-7")
        with pytest.raises(cairn.DuplicateRun, match=first.run_id) as caught:
            await engine.start(once, dedup_key="order-7")
        assert caught.value.run_id == first.run_id
        assert len(await engine.list_runs()) == 1  # nothing stored for the refused start
        release.set()
        assert await first.result(timeout=WAIT) == "done"
        again = await engine.start(once, dedup_key="order-7")  # free once the holder ended
        assert await again.result(timeout=WAIT) == "done"


async def test_dedup__starts_racing_for_one_key__one_wins_the_rest_name_it(kit: Kit) -> None:
    release = asyncio.Event()

    @kit.workflow("q.dedup-race", queue="q-dedup-race")
    async def once() -> str:
        await release.wait()
        return "done"

    async with kit.engine() as engine:
        outcomes = await asyncio.gather(
            *(engine.start(once, dedup_key="order-9") for _ in range(8)),
            return_exceptions=True,
        )
        started = [o for o in outcomes if isinstance(o, cairn.RunHandle)]
        refused = [o for o in outcomes if isinstance(o, cairn.DuplicateRun)]
        assert len(started) == 1, outcomes
        assert len(refused) == 7, outcomes
        assert {error.run_id for error in refused} == {started[0].run_id}
        release.set()
        assert await started[0].result(timeout=WAIT) == "done"


async def test_update__a_limit_changed_live_takes_effect_without_a_restart(kit: Kit) -> None:
    release = asyncio.Event()

    @kit.workflow("q.live", queue="q-live")
    async def waits() -> None:
        await release.wait()

    async with kit.engine() as engine:
        await engine.queues.update("q-live", concurrency=1)
        runs = [await engine.start(waits) for _ in range(4)]

        async def executing() -> int:
            page = await engine.list_runs(status="RUNNING")
            return len(page)

        async def one() -> bool:
            return await executing() == 1

        await _until(one, "one run to execute")

        async def says_why() -> bool:
            held = await engine.control.record(runs[-1].run_id)
            return held.waiting_for == "queue 'q-live': concurrency limit 1 reached"

        await _until(says_why, "the held run to name the limit holding it")
        assert await executing() == 1
        await engine.queues.update("q-live", concurrency=3)

        async def three() -> bool:
            return await executing() == 3

        await _until(three, "three runs to execute after the change")
        release.set()
        for run in runs:
            await run.result(timeout=WAIT)
        info = await engine.queues.get("q-live")
        assert info is not None and info.concurrency == 3


async def test_declaration__stored_at_open_and_bad_limits_refused(kit: Kit) -> None:
    kit.registry.add_queue(cairn.Queue("q-declared", concurrency=4, rate="10/1m"))
    async with kit.engine() as engine:
        info = await engine.queues.get("q-declared")
        assert info is not None
        assert (info.concurrency, info.rate) == (4, "10/60s")
        with pytest.raises(ValueError, match="concurrency of queue 'q-declared'"):
            await engine.queues.update("q-declared", concurrency=0)
    with pytest.raises(ValueError, match="rate of queue 'q-bad'"):
        cairn.Queue("q-bad", rate="fast")
