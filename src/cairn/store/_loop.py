"""What a store may know about the event loop it runs on."""

from __future__ import annotations

import asyncio


def others_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """True if other callbacks are queued to run in this loop iteration.

    Reads the stock event loop's ready queue; on loops without one (uvloop), assume yes,
    which keeps group commit and costs one loop iteration per write.
    """
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0
