"""The workflows the benchmark runs: ten trivial steps, and ten steps that can hang once."""

from __future__ import annotations

import asyncio
import os

import cairn

STEPS = 10


@cairn.step(name="bench.add")
async def add(value: int) -> int:
    return value + 1


@cairn.workflow(name="bench.ten_steps")
async def ten_steps(value: int) -> int:
    for _ in range(STEPS):
        value = await add(value)
    return value


@cairn.workflow(name="bench.no_steps")
async def no_steps(value: int) -> int:
    """A run and nothing else: what a run costs beside its steps."""
    return value


@cairn.step(name="bench.hang_once")
async def hang_once(value: int, marker: str) -> int:
    """The first execution ever creates `marker` and hangs (to be killed); later ones pass."""
    if not os.path.exists(marker):
        with open(marker, "w") as flag:
            flag.write(str(os.getpid()))
        await asyncio.Event().wait()
    return value + 1


@cairn.workflow(name="bench.crashy")
async def crashy(value: int, marker: str) -> int:
    """Ten steps; the sixth hangs on its first execution."""
    for i in range(STEPS):
        value = await (hang_once(value, marker) if i == 5 else add(value))
    return value
