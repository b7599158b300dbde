"""What a store may know about the event loop it runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Sized
from typing import Any


def others_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """True if other callbacks are queued to run in this loop iteration.

    Reads the stock event loop's ready queue; on loops without one (uvloop), assume yes,
    which keeps group commit and costs one loop iteration per write.
    """
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0


def ready_queue(loop: asyncio.AbstractEventLoop) -> Sized | None:
    """The stock event loop's queue of ready callbacks, None on loops without one (uvloop).

    `others_ready` for a caller that asks on every write: the loop makes the queue once
    and never replaces it, so it is read once and its length asked each time.
    """
    ready: Sized | None = getattr(loop, "_ready", None)
    return ready


def answer(batch: Sequence[tuple[Any, asyncio.Future[Any], Any]], outcomes: Sequence[Any]) -> None:
    """Settle each writer's future (`batch`'s second items) with its outcome.

    An outcome that is an exception is raised there.
    """
    for (_, future, _), outcome in zip(batch, outcomes, strict=True):
        if future.done():
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
