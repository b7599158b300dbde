"""Operator requests reaching a live run: cancel, pause, and the workflow timeout.

Requests are acted on at durable points (a new step, sleep, wait or child), never in the
middle of a step; in-memory sleeps are interrupted at once. `cairn.shield()` holds them
off so that cleanup can still run steps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from cairn.authoring import shield
from cairn.core.signals import Suspend
from cairn.errors import Cancelled


class Interrupts:
    """The pending requests of one live run."""

    __slots__ = ("_loop", "_wakers", "cancel", "delivered", "pause", "reason")

    def __init__(self, loop: asyncio.AbstractEventLoop, control: str | None) -> None:
        self._loop = loop
        self.cancel = control == "cancel"
        self.pause = control == "pause"
        self.reason = "cancelled" if self.cancel else ""
        self.delivered = False
        self._wakers: set[asyncio.Future[None]] = set()

    def request(self, control: str | None, reason: str = "") -> None:
        """Record a request (None clears a pause) and interrupt in-memory waits."""
        if control == "cancel":
            self.cancel = True
            self.reason = reason or "cancelled"
        elif control == "pause":
            self.pause = True
        else:
            self.pause = False
        for waker in list(self._wakers):
            if not waker.done():
                waker.set_result(None)

    @staticmethod
    def shielded() -> bool:
        """True inside `cairn.shield()`."""
        return shield.active()

    def checkpoint(self) -> None:
        """Act on a pending request at a durable point (unless shielded)."""
        if not (self.cancel or self.pause) or self.shielded():
            return
        if self.cancel:
            self.delivered = True
            raise Cancelled(self.reason)
        if self.pause:
            raise Suspend("PAUSED", None)

    async def wait(self, awaitable: Awaitable[Any]) -> None:
        """Await `awaitable` (an in-memory sleep), cut short by a request."""
        waker: asyncio.Future[None] = self._loop.create_future()
        self._wakers.add(waker)
        task = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({task, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._wakers.discard(waker)
            if not task.done():
                task.cancel()
        self.checkpoint()
