"""What a store may know about the event loop it runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any


def others_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """True if other callbacks are queued to run in this loop iteration.

    Reads the stock event loop's ready queue; on loops without one (uvloop), assume yes,
    which keeps group commit and costs one loop iteration per write.
    """
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0


def answer(batch: Sequence[tuple[Any, asyncio.Future[Any]]], outcomes: Sequence[Any]) -> None:
    """Settle each writer's future of `batch` with its outcome (an exception: raised there)."""
    for (_, future), outcome in zip(batch, outcomes, strict=True):
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
