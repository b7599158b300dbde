"""`sleep_chunked(total_ms, chunk_ms=250)`: a sleep that a cancellation interrupts.

A short sleep is one durable step that sleeps in memory, `chunk_ms` at a time, checking
for a cancellation between chunks (and is not slept again when the run replays). A long
one is `cairn.sleep`: the run parks, holding no worker, and a cancellation reaches it at
once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cairn.authoring import primitives, usage
from cairn.authoring.retry import Retry
from cairn.errors import InvalidValue
from cairn.steps import calling

__all__ = ["PARK_AFTER_MS", "sleep_chunked"]

PARK_AFTER_MS = 5000
"""Sleeps longer than this (5 s) park the run instead of sleeping in memory."""
_ONCE = Retry(max_attempts=1)


@usage.checked("cairn.steps.sleep.sleep_chunked")
def sleep_chunked(total_ms: float, chunk_ms: float = 250, *, name: str | None = None) -> Any:
    """Sleep `total_ms` milliseconds, checking for a cancellation every `chunk_ms`.

    Args:
        total_ms: How long to sleep, in milliseconds (0 returns at once).
        chunk_ms: How often a short sleep checks for a cancellation.
        name: The name of its history entry (default "sleep_chunked").

    Returns:
        None (an awaitable in an async workflow, or where an event loop runs outside
        workflow code).

    Raises:
        cairn.Cancelled: The run was cancelled during the sleep.
        ValueError: A negative or non-numeric duration, at the call.
    """
    if isinstance(total_ms, bool) or not isinstance(total_ms, int | float) or not total_ms >= 0:
        raise InvalidValue(f"sleep_chunked: total_ms must be a number >= 0, got {total_ms!r}")
    calling.positive_ms(chunk_ms, "sleep_chunked chunk_ms")
    label = name or "sleep_chunked"
    if total_ms > PARK_AFTER_MS and calling.in_workflow():
        return primitives.sleep(label, float(total_ms) / 1000)
    # The step's recorded input is the call's own, in milliseconds, as history shows it.
    return calling.call(label, _sleep, (total_ms, chunk_ms), retries=_ONCE)


async def _sleep(total_ms: float, chunk_ms: float) -> None:
    total, chunk = float(total_ms) / 1000, float(chunk_ms) / 1000
    loop = asyncio.get_running_loop()
    end = loop.time() + total
    while (left := end - loop.time()) > 0:
        calling.check_cancelled()
        await asyncio.sleep(min(chunk, left))
    calling.check_cancelled()
