"""A retry backoff longer than a second parks the run: it frees its slot and survives a crash."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import cairn
from cairn.authoring.definitions import WorkflowDef
from cairn.clock import VirtualClock
from cairn.store.records import RunRecord

from .kit import WAIT, Kit


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


def _declare(kit: Kit, calls: Counter[str], delay: str) -> WorkflowDef[..., str]:
    @kit.step("charge", retries=cairn.Retry(max_attempts=3, delay=delay, jitter=0))
    async def charge() -> str:
        calls["charge"] += 1
        if calls["charge"] == 1:
            raise ConnectionError("gateway down")
        return "charged"

    @kit.workflow("backoff.order")
    async def order() -> str:
        calls["workflow"] += 1
        return str(await charge())

    return order


async def test_backoff__long_backoff_parks_the_run_and_frees_its_slot(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()
    order = _declare(kit, calls, "30s")

    @kit.workflow("backoff.quick")
    async def quick(n: int) -> int:
        return n + 1

    async with kit.engine(clock=clock, workers=1) as engine:
        run = await engine.start(order)
        parked = await until(engine, run.run_id, "SLEEPING")
        assert parked.wake_at == pytest.approx(clock.now() + 30, abs=0.5)
        summary = await run.describe()
        assert summary.waiting_for is not None
        assert summary.waiting_for.startswith("retrying 'charge' in 30 s")
        # The only worker slot is free while the step waits for its next attempt.
        assert await (await engine.start(quick, 1)).result(timeout=WAIT) == 2
        clock.advance(30)
        assert await run.result(timeout=WAIT) == "charged"
        history = await engine.history(run.run_id)
    assert calls == {"workflow": 2, "charge": 2}
    assert [(h.key, h.status, h.attempts) for h in history] == [("charge#1", "completed", 2)]


async def test_backoff__a_crash_during_the_backoff_keeps_the_pending_retry(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()
    order = _declare(kit, calls, "1m")

    first = kit.engine(clock=clock)
    await first.open()
    run = await first.start(order)
    await until(first, run.run_id, "SLEEPING")
    await first.close()  # the process goes away during the backoff
    clock.advance(59)
    async with kit.engine(clock=clock) as second:
        assert second.worker is not None and await second.worker.claim_once() == 0
        assert await (await second.get(run.run_id)).status() == cairn.RunStatus.SLEEPING
        clock.advance(1)
        assert await (await second.get(run.run_id)).result(timeout=WAIT) == "charged"
        history = await second.history(run.run_id)
    assert calls["charge"] == 2  # attempt 1 failed, attempt 2 ran once after the crash
    assert history[0].attempts == 2


async def test_backoff__pause_during_a_parked_backoff_holds_the_retry(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    clock = VirtualClock()
    order = _declare(kit, calls, "10s")

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(order)
        await until(engine, run.run_id, "SLEEPING")
        await run.pause()
        clock.advance(10)
        assert engine.worker is not None
        await engine.worker.claim_once()
        assert await run.status() == cairn.RunStatus.PAUSED and calls["charge"] == 1
        await run.resume()
        assert await run.result(timeout=WAIT) == "charged"
    assert calls["charge"] == 2


async def test_backoff__a_short_backoff_stays_in_memory(kit: Kit) -> None:
    calls: Counter[str] = Counter()
    order = _declare(kit, calls, "200ms")

    async with kit.engine() as engine:
        run = await engine.start(order)
        assert await run.result(timeout=WAIT) == "charged"
        stored = await engine.control.record(run.run_id)
    assert calls == {"workflow": 1, "charge": 2}  # no park, so no replay
    assert stored.wake_at is None
