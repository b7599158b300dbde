"""cairn.steps.sleep.sleep_chunked: short sleeps in memory, long ones parked."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cairn
from cairn.clock import VirtualClock
from cairn.steps import sleep
from engine.kit import WAIT, Kit

from .test_http import until_status


async def test_sleep__a_short_sleep_is_one_step(kit: Kit) -> None:
    @kit.workflow("sleep.short")
    async def flow() -> str:
        await sleep.sleep_chunked(120, chunk_ms=40)
        await sleep.sleep_chunked(0)
        return "rested"

    async with kit.engine() as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == "rested"
        history = await engine.history(run.run_id)
    assert [(h.kind, h.name, h.status) for h in history] == [
        ("step", "sleep_chunked", "completed"),
        ("step", "sleep_chunked", "completed"),
    ]
    # Its input in the milliseconds it was called with (it once read (0.12, 0.04)).
    assert [h.input for h in history] == [
        {"args": [120, 40], "kwargs": {}},
        {"args": [0, 250], "kwargs": {}},
    ]


async def test_sleep__a_long_sleep_parks_the_run(sqlite_kit: Kit) -> None:
    clock = VirtualClock()

    @sqlite_kit.workflow("sleep.long")
    def flow() -> str:  # a sync workflow
        sleep.sleep_chunked(60_000, name="cool down")
        return "cooled"

    async with sqlite_kit.engine(clock=clock) as engine:
        run = await engine.start(flow)
        await until_status(engine, run.run_id, "SLEEPING")
        clock.advance(60)
        assert await run.result(timeout=WAIT) == "cooled"
        [entry] = await engine.history(run.run_id)
    assert (entry.kind, entry.name) == ("sleep", "cool down")


async def test_sleep__a_cancel_stops_a_short_sleep_between_chunks(sqlite_kit: Kit) -> None:
    @sqlite_kit.workflow("sleep.cancelled")
    async def flow() -> str:
        await sleep.sleep_chunked(4_000, chunk_ms=20)
        return "slept"

    async with sqlite_kit.engine(lease="3s") as engine:
        run = await engine.start(flow)
        # Synchronised on the worker's heartbeat: the sleep's step is executing.
        async with asyncio.timeout(WAIT):
            while not await engine.control.executing(run.run_id):
                await asyncio.sleep(0.02)
        await engine.cancel(run.run_id)
        with pytest.raises(cairn.RunCancelled):
            await run.result(timeout=WAIT)
        history = await engine.history(run.run_id)
    # Cancelled inside the step: it never completed.
    assert [(h.kind, h.status) for h in history] == [("cancel", "completed")]


async def test_sleep__outside_a_run() -> None:
    assert await sleep.sleep_chunked(30, chunk_ms=10) is None
    assert await asyncio.to_thread(sleep.sleep_chunked, 30, 10) is None


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: sleep.sleep_chunked(-1), "total_ms must be a number >= 0"),
        (lambda: sleep.sleep_chunked("1s"), "total_ms must be a number >= 0"),
        (lambda: sleep.sleep_chunked(10, chunk_ms=0), "chunk_ms must be a positive number"),
    ],
)
def test_sleep__bad_arguments_fail_at_the_call(call: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        call()
