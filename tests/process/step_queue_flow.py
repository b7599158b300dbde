"""Workflows for the step-queue process tests: `cairn worker -m tests.process.step_queue_flow`.

Every step appends "<what> pid=<pid>" to the file CAIRN_EFFECTS names (outside the store)
and fsyncs it. The "train" step, on step queue "gpu", waits for a file `release` next to
it: the test decides when it finishes, never the clock.
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


@cairn.step("prepare")
async def prepare(n: int) -> int:
    effect("prepare")
    return n + 1


@cairn.step("train", queue="gpu")
async def train(n: int) -> dict[str, int]:
    """Executes only on a worker serving step queue "gpu"; held until released."""
    effect("train start")
    while not EFFECTS.with_name("release").exists():
        await asyncio.sleep(0.01)
    effect("train end")
    return {"model": n * 10, "pid": os.getpid()}


@cairn.step("publish")
async def publish(model: int) -> str:
    effect("publish")
    return f"published {model}"


@cairn.workflow("steps.pipeline")
async def pipeline(n: int) -> list[object]:
    ready = await prepare(n)
    trained = await train(ready)
    return [ready, trained["model"], await publish(trained["model"]), trained["pid"]]
