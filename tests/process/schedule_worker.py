"""An engine with a one-second schedule, run as a real process by test_schedules.py.

    python schedule_worker.py URL EFFECTS STOPFILE [--overlap P] [--catchup DUR]

Each run of the schedule appends ``TICK PID`` to EFFECTS (fsynced before the step
returns): the record, kept outside the database, of which tick ran where and how often.
The process runs until STOPFILE exists, then closes its engine and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import cairn

EFFECTS = Path("effects.txt")


@cairn.step("soak.record")
async def record(tick: str) -> None:
    """Append this tick and process to the effects file."""
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"{tick} {os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


@cairn.workflow("soak.tick")
async def tick() -> None:
    """One run per tick of the schedule."""
    scheduled = cairn.current_run().scheduled_at
    assert scheduled is not None
    await record(scheduled.isoformat())


async def main() -> int:
    global EFFECTS
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("effects")
    parser.add_argument("stop")
    parser.add_argument("--overlap", default="skip")
    parser.add_argument("--catchup", default="1h")
    options = parser.parse_args()
    EFFECTS = Path(options.effects)
    cairn.schedule(tick, every="1s", overlap=options.overlap, catchup=options.catchup, id="soak")
    stop = Path(options.stop)
    async with cairn.Engine(options.url, workers=8, lease="3s", poll_interval=0.2):
        print("ready", flush=True)
        while not stop.exists():
            await asyncio.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
