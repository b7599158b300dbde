"""Queues: concurrency, rate, priority, dedup and limits changed while workers run."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from tests.engine.intercept import intercept
from tests.engine.kit import WAIT, Kit

import cairn
from cairn.store.programs import claims as claim_ops


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


async def test_concurrency__runs_waking_from_a_sleep_wait_for_a_free_place(kit: Kit) -> None:
    # Sleeping runs hold no place: all eight sleep at once, and wake about together.
    running = {"now": 0, "peak": 0}

    @kit.step("q.nap.work")
    async def work(i: int) -> int:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.05)
        running["now"] -= 1
        return i

    @kit.workflow("q.nap", queue="q-nap")
    async def flow(i: int) -> int:
        await cairn.sleep("300ms")
        return await work(i)

    async with kit.engine() as engine:
        await engine.queues.update("q-nap", concurrency=2)
        runs = [await engine.start(flow, i) for i in range(8)]
        assert [await r.result(timeout=WAIT) for r in runs] == list(range(8))
    assert running["peak"] == 2


async def test_concurrency__a_woken_run_held_back_is_not_claimed_again_and_again(
    kit: Kit,
) -> None:
    # Its wake time stays past while the queue is full: the worker must not take that for
    # a timer due now and claim in a loop; a freed place or the poll brings it.
    release = asyncio.Event()

    @kit.workflow("q.napper", queue="q-held")
    async def napper() -> str:
        await cairn.sleep("300ms")
        return "rested"

    @kit.workflow("q.holder", queue="q-held")
    async def holder() -> None:
        await release.wait()

    async with kit.engine(poll_interval=0.2) as engine:
        await engine.queues.update("q-held", concurrency=1)
        napping = await engine.start(napper)

        async def asleep() -> bool:
            return (await engine.control.record(napping.run_id)).status == "SLEEPING"

        await _until(asleep, "the napper to sleep")
        holding = await engine.start(holder)

        async def held() -> bool:
            record = await engine.control.record(napping.run_id)
            return record.waiting_for == "queue 'q-held': concurrency limit 1 reached"

        await _until(held, "the woken napper to be held back")
        claims = 0

        async def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal claims
            claims += 1
            return await claim_runs(*args, **kwargs)

        claim_runs, restore = intercept(engine.store, claim_ops.claim, counted)
        await asyncio.sleep(1.0)  # five polls' time
        restore()
        release.set()
        await holding.result(timeout=WAIT)
        assert await napping.result(timeout=WAIT) == "rested"
    assert claims <= 15  # (a worker claiming in a loop makes thousands)


async def test_concurrency__a_parent_waiting_for_its_child_on_its_queue_lets_it_run(
    kit: Kit,
) -> None:
    # A waiting parent holds no place, so its child takes the only one; then the parent
    # wakes and takes it back.
    @kit.workflow("q.kid", queue="q-family")
    async def kid(x: int) -> int:
        return x * 2

    @kit.workflow("q.parent", queue="q-family")
    async def parent() -> list[int]:
        return [await kid(1), await kid(2)]

    async with kit.engine() as engine:
        await engine.queues.update("q-family", concurrency=1)
        run = await engine.start(parent)
        assert await run.result(timeout=WAIT) == [2, 4]


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
        # The limit governs the starts the store stamped (a body may run a little after its
        # claim on a loaded machine, so the bodies' own times can crowd closer together).
        stamped = sorted([(await run.describe()).started_at.timestamp() for run in runs])
    assert len(starts) == 7
    for first, fourth in zip(stamped, stamped[3:], strict=False):
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


async def test_rate__retried_runs_count_as_starts(kit: Kit) -> None:
    # The operator retries a burst of failed runs (the API they call was down): the
    # retries start no faster than the queue's rate, like new runs.
    starts: list[float] = []
    down = {"api": True}

    @kit.step("q.call", retries=1)
    async def call() -> None:
        starts.append(time.monotonic())
        if down["api"]:
            raise RuntimeError("api down")

    @kit.workflow("q.retried", queue="q-retry-rate")
    async def flow() -> None:
        await call()

    async with kit.engine() as engine:
        await engine.queues.update("q-retry-rate", rate="2/1s")
        runs = [await engine.start(flow) for _ in range(6)]
        for run in runs:
            with pytest.raises(cairn.RunFailed):
                await run.result(timeout=WAIT)
        down["api"] = False
        starts.clear()
        retried = [await engine.retry(run.run_id) for run in runs]
        for run in retried:
            await run.result(timeout=WAIT)
    starts.sort()
    assert len(starts) == 6
    for first, third in zip(starts, starts[2:], strict=False):
        assert third - first >= 0.9  # at most 2 starts in any second
