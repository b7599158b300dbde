"""Workflows for the shutdown tests, served by `cairn worker -m tests.process.shutdown_flow`.

Every step appends "<what> pid=<pid>" to the file CAIRN_EFFECTS names (outside the store)
and fsyncs it. The held steps wait for a file `release` next to it: the test decides when
they finish, never the clock.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import cairn

EFFECTS = Path(os.environ.get("CAIRN_EFFECTS", "effects.txt"))


def effect(line: str) -> None:
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


def released() -> bool:
    return EFFECTS.with_name("release").exists()


@cairn.step("held_sync")
def held_sync() -> str:
    """A plain `def` step (it runs in a thread) that finishes once released."""
    effect("held start")
    pause = threading.Event()
    while not released():
        pause.wait(0.005)
    effect("held end")
    return "held"


@cairn.step("held_async")
async def held_async() -> str:
    """The async twin of held_sync."""
    effect("held start")
    while not released():
        await asyncio.sleep(0.005)
    effect("held end")
    return "held"


@cairn.step("after")
async def after() -> str:
    effect("after")
    return "after"


@cairn.workflow("shutdown.held")
async def held(kind: str) -> list[str]:
    """A held step, then another: the durable point between them is where a stop leaves."""
    first: Any = held_sync if kind == "sync" else held_async
    return [await first(), await after()]
