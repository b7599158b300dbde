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


@cairn.workflow("celery.tick")
async def tick() -> None:
    scheduled = cairn.current_run().scheduled_at
    assert scheduled is not None
    await record(scheduled.isoformat())


cairn.schedule(tick, every="1s", id="celery-tick")
