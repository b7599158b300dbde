"""What a store may know about the event loop it runs on."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence, Sized
from typing import Any


def ready_queue(loop: asyncio.AbstractEventLoop) -> Sized | None:
    """The callbacks queued to run in `loop`'s current iteration; None if it keeps none.

    The stock event loop's ready queue. A loop without one (uvloop) has other callbacks
    ready as far as a store can tell, which keeps group commit and costs one loop
    iteration per write.
    """
    ready: Sized | None = getattr(loop, "_ready", None)
    return ready


def others_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """True if other callbacks are queued to run in this loop iteration (see ready_queue)."""
    ready = ready_queue(loop)
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
