"""A default `Engine(url)` has a slot for each of 200 runs started at once (issue 36).

Runs beyond the slots wait in the database for a second wave: on PostgreSQL that halved
the runs per second of 200 ten-step runs started at once (bench.defaults).
"""

from __future__ import annotations

import asyncio

from .kit import WAIT, Kit


async def test_default_engine__executes_200_runs_started_at_once_together(kit: Kit) -> None:
    gate = asyncio.Event()
    inside = 0

    @kit.workflow("slots.wait")
    async def wait(n: int) -> int:
        nonlocal inside
        inside += 1
        await gate.wait()
        return n

    async with kit.engine() as engine:  # no workers=: the default
        handles = [await engine.start(wait, n) for n in range(200)]
        for _ in range(int(WAIT / 0.05)):
            if inside == 200:
                break
            await asyncio.sleep(0.05)
        assert inside == 200, f"{inside} of 200 runs executing at once"
        gate.set()
        assert [await h.result(timeout=WAIT) for h in handles] == list(range(200))
