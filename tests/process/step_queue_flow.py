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
from cairn.steps import http as steps_http

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


def _stamp(url: str) -> list[object]:
    """What the step's code sees of itself; posts to `url` (its Idempotency-Key goes too)."""
    step = cairn.current_step()
    steps_http.post(url, json_body={"key": step.key})
    run = cairn.current_run()
    return [step.run_id, step.key, step.attempt, step.idempotency_key, run.workflow, os.getpid()]


@cairn.step("stamp_here")
def stamp_here(url: str) -> list[object]:
    return _stamp(url)


@cairn.step("stamp_there", queue="gpu")
def stamp_there(url: str) -> list[object]:
    """Executes only on a worker serving step queue "gpu", in another process."""
    return _stamp(url)


@cairn.workflow("steps.stamped")
async def stamped(url: str) -> list[list[object]]:
    return [await stamp_here(url), await stamp_there(url)]
