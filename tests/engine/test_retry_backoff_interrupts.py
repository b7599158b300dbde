"""A cancel or pause during a retry backoff is met there: the next attempt does not start.

A backoff is a durable point of the run (docs/howto/control.md): the failed attempt and
its retry time are stored before it. A short one (waited in memory) ends early for the
request; a long one parks the run, which a cancel or pause reaches at once.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import cairn
from cairn.authoring.definitions import WorkflowDef
from cairn.clock import VirtualClock

from .kit import WAIT, Kit
from .seeds import until

BACKOFF = 1.0  # the longest backoff waited in memory (failed_attempts.PARK_BACKOFF_AFTER)


def _declare(
    kit: Kit, delay: float, shielded: bool = False, queue: str | None = None
) -> tuple[WorkflowDef[..., str], Counter[str], asyncio.Event]:
    """The workflow, its calls by step, and an event set when `charge`'s first attempt fails."""
    calls: Counter[str] = Counter()
    failed = asyncio.Event()

    retry = cairn.Retry(max_attempts=3, delay=delay, jitter=0)

    @kit.step("charge", retries=retry, queue=queue)
    async def charge() -> str:
        calls["charge"] += 1
        if calls["charge"] == 1:
            failed.set()
            raise ConnectionError("gateway down")
        return "charged"

    @kit.step("ship")
    async def ship() -> None:
        calls["ship"] += 1

    @kit.workflow("backoff.interrupted")
    async def order() -> str:
        if shielded:
            async with cairn.shield():
                charged = await charge()
        else:
            charged = await charge()
        await ship()
        return str(charged)

    return order, calls, failed


async def _in_backoff(failed: asyncio.Event) -> float:
    """When attempt 1 failed and its backoff began (monotonic seconds)."""
    async with asyncio.timeout(WAIT):
        await failed.wait()
    await asyncio.sleep(0.1)  # its failure recorded, the backoff waited
    return time.monotonic()


async def test_backoff_interrupts__cancel_in_a_short_backoff_ends_the_run_there(kit: Kit) -> None:
    order, calls, failed = _declare(kit, BACKOFF)

    async with kit.engine() as engine:
        run = await engine.start(order)
        await _in_backoff(failed)
        assert await run.cancel() == cairn.RunStatus.RUNNING
        await until(engine, run.run_id, "CANCELLED")
        history = await engine.history(run.run_id)
        await asyncio.sleep(BACKOFF)  # past the backoff's end: still no second attempt
    # No bound on how soon: the count says the wait ended for the cancel (before, the
    # second attempt ran), and a bound in time fails on a loaded CI machine, not here.
    assert calls == {"charge": 1}
    [cancel] = history
    assert (cancel.kind, cancel.result["at"]) == ("cancel", "charge#1")


async def test_backoff_interrupts__cancel_in_a_step_queues_backoff_ends_the_run(kit: Kit) -> None:
    order, calls, failed = _declare(kit, BACKOFF, queue="gpu")

    async with kit.engine(step_queues=["gpu"]) as engine:
        run = await engine.start(order)
        await _in_backoff(failed)
        await run.cancel()
        await until(engine, run.run_id, "CANCELLED")
        await asyncio.sleep(BACKOFF)  # past the backoff's end: no attempt was sent
    assert calls == {"charge": 1}


async def test_backoff_interrupts__pause_in_a_short_backoff_parks_before_the_retry(
    kit: Kit,
) -> None:
    order, calls, failed = _declare(kit, BACKOFF)

    async with kit.engine() as engine:
        run = await engine.start(order)
        await _in_backoff(failed)
        client = await asyncio.to_thread(cairn.Client, engine.url)  # another process's view
        try:
            await asyncio.to_thread(client.pause, run.run_id)
            paused = await until(engine, run.run_id, "PAUSED")
            await asyncio.sleep(BACKOFF)  # past the backoff's end: parked, no attempt
            assert calls == {"charge": 1} and paused.owner is None
            await asyncio.to_thread(client.resume, run.run_id)
        finally:
            await asyncio.to_thread(client.close)
        assert await run.result(timeout=WAIT) == "charged"
        [entry, _] = await engine.history(run.run_id)
    assert calls == {"charge": 2, "ship": 1}
    assert (entry.key, entry.status, entry.attempts) == ("charge#1", "completed", 2)


async def test_backoff_interrupts__cancel_in_a_parked_backoff_ends_the_run(kit: Kit) -> None:
    clock = VirtualClock()
    order, calls, _ = _declare(kit, 30.0)

    async with kit.engine(clock=clock) as engine:
        run = await engine.start(order)
        await until(engine, run.run_id, "SLEEPING")
        await run.cancel()
        await until(engine, run.run_id, "CANCELLED")
        clock.advance(30)
        assert engine.worker is not None
        await engine.worker.claim_once()
        history = await engine.history(run.run_id)
    assert calls == {"charge": 1}
    [cancel] = history
    assert (cancel.kind, cancel.result["at"]) == ("cancel", "charge#1")


async def test_backoff_interrupts__a_shielded_step_retries_through_a_cancel(kit: Kit) -> None:
    order, calls, failed = _declare(kit, BACKOFF, shielded=True)

    async with kit.engine() as engine:
        run = await engine.start(order)
        began = await _in_backoff(failed)
        await run.cancel()
        await until(engine, run.run_id, "CANCELLED")
        waited = time.monotonic() - began
        history = await engine.history(run.run_id)
    # The cancel is held off: the backoff is waited out, the retry runs, and the
    # cancellation is delivered at the first durable point after the shield.
    assert calls == {"charge": 2}
    assert waited > BACKOFF * 0.8
    entry, cancel = history
    assert (entry.key, entry.status, entry.attempts) == ("charge#1", "completed", 2)
    assert (cancel.kind, cancel.result["at"]) == ("cancel", "ship#1")
