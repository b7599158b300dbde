"""Helpers of the seed-system tests (test_seed_*.py): drive a run on a virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import cairn
from cairn.clock import VirtualClock
from cairn.store.records import RunRecord

from .kit import WAIT

FINISHED = ("COMPLETED", "FAILED", "CANCELLED")


async def until(engine: cairn.Engine, run_id: str, *statuses: str) -> RunRecord:
    """The stored run once its status is one of `statuses` (polled; fails after WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            run = await engine.control.record(run_id)
            if run.status in statuses:
                return run
            await asyncio.sleep(0.005)


async def finish(
    engine: cairn.Engine, clock: VirtualClock, run: cairn.RunHandle, *, tick: float = 0.5
) -> Any:
    """Move the clock on in `tick`s until the run ends; its result (or its error raised).

    Retry backoffs and sleeps on the virtual clock then pass as the run reaches them.
    """
    async with asyncio.timeout(WAIT):
        while (await engine.control.record(run.run_id)).status not in FINISHED:
            clock.advance(tick)
            if engine.worker is not None:
                engine.worker.wake()
            await asyncio.sleep(0.01)
    return await run.result(timeout=WAIT)


async def drive(
    engine: cairn.Engine,
    clock: VirtualClock,
    run_id: str,
    reached: Callable[[RunRecord], bool],
    *,
    tick: float = 0.5,
) -> RunRecord:
    """Move the clock on in `tick`s until the stored run satisfies `reached`; that record."""
    async with asyncio.timeout(WAIT):
        while not reached(record := await engine.control.record(run_id)):
            clock.advance(tick)
            if engine.worker is not None:
                engine.worker.wake()
            await asyncio.sleep(0.01)
    return record


def sleeping_until(wake_at: float, within: float = 0.001) -> Callable[[RunRecord], bool]:
    """`drive` until the run sleeps until `wake_at` (give or take `within` seconds)."""
    return lambda run: (
        run.status == "SLEEPING"
        and run.wake_at is not None
        and abs(run.wake_at - wake_at) <= within
    )


def chain_elsewhere(name: str, registry: cairn.Registry) -> cairn.Workflow:
    """A chain declared in this module (to meet one of the same name from another)."""
    return cairn.Workflow(name, registry=registry)
