"""A ten-step workflow that the crash tests run in a real process and kill with SIGKILL.

    python crash_workflow.py DB EFFECTS [--crash POINT] [--run-id ID] [--bad-input]

Every step appends a line to EFFECTS, a file outside the store, and fsyncs it before
returning: the counter that proves which steps ran how often. POINT makes this process
stop where the test kills it:

- ``before:N``: step N has written its line but not returned, so nothing is committed;
- ``after:N``: step N is committed and the workflow stops before step N+1 starts;
- ``backoff:N``: step N fails, its attempt is recorded, and the process waits out a
  one-second backoff.

Without POINT the process starts (or, with an existing run id, finds) the run, executes
or recovers it, prints one JSON line with the result and timings, and exits 0.
``--bad-input`` feeds the engine bad input instead, printing one ``error: ...`` line each.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # before importing cairn: the timings include the imports

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import cairn  # noqa: E402

IMPORTED = time.monotonic()
STEPS = 10
CRASH = ""
EFFECTS = Path("effects.txt")


def effect(line: str) -> None:
    """Append a line to the side-effect file and make it durable before going on."""
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{line} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


@cairn.step("work", retries=cairn.Retry(max_attempts=5, delay="1s", backoff=1.0, jitter=0))
def work(i: int) -> int:
    """Step i: a side effect, then i squared."""
    if CRASH == f"backoff:{i}":
        effect(f"work {i} failed")
        raise cairn.RetryableError(f"step {i} fails in the crashing process")
    effect(f"work {i}")
    if CRASH == f"before:{i}":
        threading.Event().wait()  # the side effect happened; the commit never will
    return i * i


@cairn.workflow("crash.ten_steps")
async def ten_steps(n: int) -> int:
    """Sum of squares of 1..n, one step each."""
    total = 0
    for i in range(1, n + 1):
        total += await work(i)
        if CRASH == f"after:{i}":
            await asyncio.Event().wait()  # step i is committed; step i+1 never starts
    return total


async def bad_input(engine: cairn.Engine) -> list[str]:
    """Each bad call must fail with a one-line error and leave the database as it was."""
    attempts: list[Any] = [
        lambda: engine.start(ten_steps, object()),
        lambda: engine.start(ten_steps, 3, delay="soon"),
        lambda: engine.start(ten_steps, 3, run_id=""),
        lambda: engine.start(ten_steps, n={1, 2, ("nested", lambda: 0)}),
        lambda: engine.list_runs(status="bogus"),
        lambda: engine.list_runs(cursor="not-a-cursor"),
        lambda: engine.get("missing-run"),
        lambda: engine.history("missing-run"),
    ]
    errors = []
    for attempt in attempts:
        try:
            await attempt()
        except (cairn.CairnError, ValueError, TypeError) as exc:
            errors.append(f"error: {exc}")
        else:
            errors.append("no error")
    return errors


async def main() -> int:
    global CRASH, EFFECTS
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("effects")
    parser.add_argument("--crash", default="")
    parser.add_argument("--run-id", default="crash-run")
    parser.add_argument("--bad-input", action="store_true")
    options = parser.parse_args()
    CRASH, EFFECTS = options.crash, Path(options.effects)

    async with cairn.Engine(f"sqlite:///{options.db}", workers=4, lease="30s") as engine:
        opened = time.monotonic()
        if options.bad_input:
            for line in await bad_input(engine):
                print(line)
            return 1
        handle = await engine.start(ten_steps, STEPS, run_id=options.run_id)
        result = await handle.result(timeout=60)
        done = time.monotonic()
    report = {
        "result": result,
        "imported": IMPORTED - STARTED,
        "opened": opened - STARTED,
        "done": done - STARTED,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
