"""Time as a seam: the system clock in production, a virtual one in tests."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Where cairn reads the time and waits for it."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""
        ...


class SystemClock:
    """The real wall clock."""

    # Seconds since the epoch: time.time itself, no Python frame around it (a step reads
    # the clock twice).
    now = staticmethod(time.time)

    async def sleep(self, seconds: float) -> None:
        """Wait in real time."""
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """A clock that only moves when told to; sleepers wake as it passes their time."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def now(self) -> float:
        """The virtual time."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until the virtual time has advanced by `seconds`."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + seconds, fut))
        try:
            await fut
        finally:
            self._sleepers = [(t, f) for t, f in self._sleepers if f is not fut]

    def next_due(self) -> float | None:
        """When the earliest sleeper still waiting is due, or None if nobody sleeps."""
        return min((due for due, fut in self._sleepers if not fut.done()), default=None)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper now due."""
        self._now += seconds
        for due, fut in list(self._sleepers):
            if due <= self._now and not fut.done():
                fut.set_result(None)
