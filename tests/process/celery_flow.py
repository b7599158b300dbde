"""Workflows for the Celery tests: `cairn worker --transport celery -m tests.process.celery_flow`.

Every step appends "<what> pid=<pid>" to the file CAIRN_EFFECTS names (outside the store)
and fsyncs it. `celery.held` waits in its second step for a file `release` next to it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import cairn

EFFECTS = Path(os.environ.get("CAIRN_EFFECTS", "effects.txt"))


def effect(line: str) -> None:
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


@cairn.step("square")
async def square(n: int) -> int:
    return n * n


@cairn.workflow("celery.math")
async def math(n: int) -> list[int]:
    """Two steps and a short durable sleep (a wake-up the dispatcher publishes)."""
    first = await square(n)
    await cairn.sleep(0.05)
    return [first, await square(first % 97)]


@cairn.step("mark")
async def mark(what: str) -> str:
    effect(what)
    return what


@cairn.step("hold")
async def hold() -> str:
    effect("hold start")
    while not EFFECTS.with_name("release").exists():
        await asyncio.sleep(0.01)
    effect("hold end")
    return "held"


@cairn.workflow("celery.held")
async def held() -> list[str]:
    return [await mark("first"), await hold(), await mark("last")]


@cairn.step("pause")
async def pause(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@cairn.workflow("celery.steady")
async def steady(n: int, steps: int = 4, seconds: float = 0.25) -> int:
    """`steps` steps of `seconds` each: a run that is in flight for a while."""
    for _ in range(steps):
        await pause(seconds)
    return n


@cairn.workflow("celery.once")
async def once(n: int) -> int:
    """One effect per run, "once N": counts how often run N executed its step."""
    await mark(f"once {n}")
    return n


# Runs of queue "limited" take one slot at a time (Celery queue "cairn.limited").
limited = cairn.Queue("limited", concurrency=1)


@cairn.workflow(name="celery.limited", queue=limited)
async def limited_run(n: int) -> int:
    await pause(0.3)
    return n


@cairn.workflow(name="celery.lonely", queue="lonely")
async def lonely() -> str:
    """A run of a queue its test's worker does not consume (Celery queue "cairn.lonely").

    The tests' clients do not import this module: they start it with queue="lonely".
    """
    return "served"


@cairn.step("narrate")
async def narrate(n: int) -> int:
    """Streams n chunks to "tokens" and closes it, in the Celery worker executing the run."""
    stream = cairn.stream("tokens")
    for i in range(n):
        await stream.write(i)
    await stream.close()
    return n


@cairn.workflow("celery.streams")
async def streams(n: int) -> int:
    return int(await narrate(n))


@cairn.step("counted")
async def counted(n: int, i: int, seconds: float) -> int:
    """Effects "start N.I" and "end N.I": a step completed twice shows two ends."""
    effect(f"start {n}.{i}")
    await asyncio.sleep(seconds)
    effect(f"end {n}.{i}")
    return i


@cairn.workflow("celery.counted")
async def counted_steps(n: int, steps: int = 5, seconds: float = 0.5) -> int:
    """`steps` counted steps of `seconds` each, one after another."""
    return sum([await counted(n, i, seconds) for i in range(steps)])
