"""Workflows for the Celery soak test (tests/process/test_celery_soak.py).

Their workflow queues are named after CAIRN_SOAK_QUEUE (a test's `own_queue`), set
before the import, so that only that test's workers consume them: runs on "Q", children
on "Q.kids" (two runs at once). Every step appends "end KEY pid=..." to the file
CAIRN_EFFECTS names once it has done its work, and "in KEY" / "out KEY" around a child's
step: two "end" lines for one key are a step completed twice, and the "in"/"out" lines
show how many children ran at once.
"""

from __future__ import annotations

import asyncio
import os

from tests.process.celery_flow import effect

import cairn

QUEUE = os.environ.get("CAIRN_SOAK_QUEUE", "soak")
KIDS = cairn.Queue(f"{QUEUE}.kids", concurrency=2)


@cairn.step("soak.work")
async def work(key: str, seconds: float) -> str:
    await asyncio.sleep(seconds)
    effect(f"end {key}")
    return key


@cairn.step("soak.kid_work")
async def kid_work(key: str, seconds: float) -> str:
    effect(f"in {key}")
    await asyncio.sleep(seconds)
    effect(f"out {key}")
    effect(f"end {key}")
    return key


@cairn.workflow("soak.steps", queue=QUEUE)
async def steps(n: int, count: int = 3, seconds: float = 0.2) -> int:
    """`count` steps of `seconds` each."""
    for i in range(count):
        await work(f"steps {n}.{i}", seconds)
    return n


@cairn.workflow("soak.kid", queue=KIDS)
async def kid(n: int, i: int) -> str:
    """Two steps on the queue that runs two children at once."""
    await kid_work(f"kid {n}.{i}.0", 0.2)
    await kid_work(f"kid {n}.{i}.1", 0.2)
    return f"{n}.{i}"


@cairn.workflow("soak.parent", queue=QUEUE)
async def parent(n: int, kids: int = 3) -> list[str]:
    """A step, `kids` children started at once and awaited, a step."""
    await work(f"parent {n}.start", 0.05)
    handles = [await cairn.start_child(kid, n, i) for i in range(kids)]
    got = [str(await handle.result()) for handle in handles]
    await work(f"parent {n}.end", 0.05)
    return got


@cairn.workflow("soak.rounds", queue=QUEUE)
async def rounds(n: int, round_no: int, last: int) -> int:
    """A step a round, each round a run of its own (continue_as_new)."""
    await work(f"rounds {n}.{round_no}", 0.1)
    if round_no < last:
        cairn.continue_as_new(n, round_no + 1, last)
    return n
