"""Workflows for the waiting and control process tests, and a worker process serving them.

    python served_workflows.py URL EFFECTS [--hold N,...] [--lease 30s]

The process runs an engine on URL that claims and executes runs until it is killed. Every
step appends a line to EFFECTS (a file outside the store) and fsyncs it: the counter that
proves which steps ran how often, and in which process. A step that waits for the test
waits for a file next to EFFECTS (``release``), never for time. ``--hold`` makes the listed
branches of "proc.gather" block after writing their line, so the test can kill the process
in the middle of the gather.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import cairn

EFFECTS = Path("effects.txt")
HOLD: set[int] = set()


def effect(line: str) -> None:
    """Append a line to the side-effect file and make it durable before going on."""
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


def released() -> bool:
    return EFFECTS.with_name("release").exists()


@cairn.step("note")
async def note(line: str) -> str:
    """A step whose only work is its side effect."""
    effect(line)
    return line


@cairn.workflow("proc.sleeper")
async def sleeper(seconds: float) -> str:
    """A step, a durable sleep, a step."""
    await note("before")
    await cairn.sleep(seconds)
    return str(await note("after"))


@cairn.workflow("proc.waiter")
async def waiter() -> list[Any]:
    """A step, then two events of one name, consumed in order."""
    await note("before")
    got = [await cairn.wait_for_event("go"), await cairn.wait_for_event("go")]
    await note(f"after {got}")
    return got


@cairn.step("held_sync")
def held_sync() -> str:
    """Runs until the test releases it; a cancel does not interrupt it."""
    effect("held start")
    pause = threading.Event()
    while not released():
        pause.wait(0.005)  # a slice of work, then look again
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


@cairn.step("tick")
async def tick(i: int) -> int:
    """Five milliseconds of work, with a side effect."""
    effect(f"tick {i}")
    await asyncio.sleep(0.005)
    return i


@cairn.workflow("proc.control")
async def control(kind: str, ticks: int) -> str:
    """A step held mid-way by the test, then many short steps: durable points to stop at."""
    held: Any = held_sync if kind == "sync" else held_async
    try:
        await held()
        for i in range(ticks):
            await tick(i)
        await note("finished")
        return "done"
    except cairn.Cancelled:
        async with cairn.shield():
            await note("cleanup")
        raise


@cairn.step("stubborn_sync")
def stubborn_sync() -> None:
    """Never ends by itself; check_cancelled stops it."""
    effect("stubborn start")
    pause = threading.Event()
    try:
        while True:
            cairn.check_cancelled()
            pause.wait(0.005)
    except cairn.Cancelled:
        effect("stubborn stopped")
        raise


@cairn.step("stubborn_async")
async def stubborn_async() -> None:
    """The async twin of stubborn_sync."""
    effect("stubborn start")
    try:
        while True:
            cairn.check_cancelled()
            await asyncio.sleep(0.005)
    except cairn.Cancelled:
        effect("stubborn stopped")
        raise


@cairn.workflow("proc.stubborn")
async def stubborn(kind: str) -> None:
    """One long step that only a cancellation ends."""
    long_step: Any = stubborn_sync if kind == "sync" else stubborn_async
    await long_step()
    await note("never")


@cairn.step("part")
def part(i: int) -> int:
    """Branch i of the gather; a held branch never returns in this process."""
    effect(f"part {i}")
    if i in HOLD:
        threading.Event().wait()  # the side effect happened; the commit never will
    return i * i


@cairn.workflow("proc.gather")
async def gather() -> list[int]:
    """Five steps at once."""
    branches: list[Any] = [part(i) for i in range(1, 6)]  # a sync step: run in threads
    return list(await asyncio.gather(*branches))


@cairn.step("streamer")
async def streamer(n: int) -> int:
    """Streams n chunks; until the test releases it, then holds (to be killed mid-stream)."""
    effect("streamer start")
    stream = cairn.stream("tokens")
    for i in range(n):
        await stream.write(i)
    while not released():
        await asyncio.sleep(0.01)
    return n


@cairn.step("spoken")
async def spoken(n: int) -> int:
    """Streams n chunks and completes."""
    effect("spoken")
    stream = cairn.stream("tokens")
    for i in range(n):
        await stream.write(i)
    return n


@cairn.workflow("proc.streams_replayed")
async def streams_replayed(n: int) -> int:
    """A stream written by workflow code and a completed step, then a step killed mid-way:
    the run that takes it over replays both and streams nothing twice."""
    await cairn.stream("tokens").write("start")
    done = await spoken(n)
    await held_async()
    stream = cairn.stream("tokens")
    await stream.write("end")
    await stream.close()
    return done


@cairn.workflow("proc.streams")
async def streams(n: int) -> int:
    """Workflow code writes, a step streams (killed mid-stream), workflow code closes."""
    await cairn.stream("tokens").write("start")
    done = await streamer(n)
    stream = cairn.stream("tokens")
    await stream.write("end")
    await stream.close()
    return done


def times(line: str) -> int:
    """How often `line` is in the side-effect file so far (in any process)."""
    if not EFFECTS.exists():
        return 0
    lines = EFFECTS.read_text(encoding="utf-8").splitlines()
    return sum(1 for text in lines if text.rsplit(" pid=", 1)[0] == line)


@cairn.step("flaky_streamer", retries=cairn.Retry(max_attempts=3, delay=0))
async def flaky_streamer() -> str:
    """Attempt 1 streams and raises; attempt 2 streams and holds (to be killed); then ok."""
    effect("flaky start")
    n = times("flaky start")
    stream = cairn.stream("tokens")
    await stream.write(f"try {n}")
    if n == 1:
        await asyncio.sleep(0.2)  # let the chunk's commit land (a failure drops the buffer)
        raise ConnectionError("the model went away")
    while n == 2 and not released():
        await asyncio.sleep(0.01)
    return f"try {n}"


@cairn.workflow("proc.streams_flaky")
async def streams_flaky() -> str:
    """A step that fails once, is retried, is killed mid-stream, and completes."""
    done = await flaky_streamer()
    await cairn.stream("tokens").close()
    return done


@cairn.step("doomed_streamer", retries=cairn.Retry(max_attempts=2, delay=0))
async def doomed_streamer() -> None:
    """Streams and holds (to be killed) the first time; then streams and fails, twice."""
    effect("doomed start")
    n = times("doomed start")
    await cairn.stream("tokens").write(f"try {n}")
    while n == 1 and not released():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # let the chunk's commit land (a failure drops the buffer)
    raise ConnectionError(f"attempt {n} failed")


@cairn.workflow("proc.streams_doomed")
async def streams_doomed() -> None:
    """A step killed mid-stream whose last attempt then fails: the run fails."""
    await doomed_streamer()
    await cairn.stream("tokens").close()  # never reached


async def serve(url: str, lease: str) -> None:
    async with cairn.Engine(url, workers=16, poll_interval=0.05, lease=lease):
        print("ready", flush=True)
        await asyncio.Event().wait()  # until killed


def main() -> int:
    global EFFECTS, HOLD
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("effects")
    parser.add_argument("--hold", default="")
    parser.add_argument("--lease", default="30s")
    options = parser.parse_args()
    EFFECTS = Path(options.effects)
    HOLD = {int(i) for i in options.hold.split(",") if i}
    asyncio.run(serve(options.url, options.lease))
    return 0


if __name__ == "__main__":
    sys.exit(main())
