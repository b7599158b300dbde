"""A one-second schedule for the Celery tests (`celery -A cairn.celery.worker worker`).

Each run appends "tick <scheduled time> pid=<pid>" to the file CAIRN_EFFECTS names.
"""

from __future__ import annotations

import os
from pathlib import Path

import cairn

EFFECTS = Path(os.environ.get("CAIRN_EFFECTS", "effects.txt"))


@cairn.step("tick.record")
async def record(tick: str) -> None:
    with EFFECTS.open("a", encoding="utf-8") as out:
        out.write(f"tick {tick} pid={os.getpid()}\n")
        out.flush()
        os.fsync(out.fileno())


# The test's own workflow queue (Celery queue "cairn.<name>"), so that its workers, which
# take only that queue, consume no other test's messages on the shared brokers.
@cairn.workflow("celery.tick", queue=os.environ.get("CAIRN_TICK_QUEUE") or None)
async def tick() -> None:
    scheduled = cairn.current_run().scheduled_at
    assert scheduled is not None
    await record(scheduled.isoformat())


cairn.schedule(tick, every="1s", id="celery-tick")
