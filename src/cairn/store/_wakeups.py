"""Wake-up hints for a worker's claim loop: "runs may be claimable now" or "at time T".

A hint is never a promise (the claim decides), so a lost or spurious one costs at most a
poll interval or an empty claim. Wake times are compared with the wall clock, so under a
virtual clock they only make a wake-up early or late, never a claim wrong.
"""

from __future__ import annotations

import asyncio
import heapq
import time

MAX_TIMERS = 1024


class WakeSignal:
    """An asyncio event plus the earliest known wake times of parked runs."""

    def __init__(self) -> None:
        self._event = asyncio.Event()  # a hint arrived, or the earliest timer moved
        self._hint = False
        self._timers: list[float] = []

    def set(self) -> None:
        """Runs may be claimable now."""
        self._hint = True
        self._event.set()

    def at(self, when: float) -> None:
        """A run becomes claimable at `when` (epoch seconds); a past time means now."""
        if when <= time.time():
            self.set()
            return
        if not self._timers or when < self._timers[0]:
            self._event.set()  # a waiter must shorten its sleep
        heapq.heappush(self._timers, when)
        if len(self._timers) > 2 * MAX_TIMERS:
            # Keep the earliest: the others are found by polling if they are dropped.
            self._timers = heapq.nsmallest(MAX_TIMERS, self._timers)

    def wake_times(self, wakes: list[float]) -> None:
        """Apply hints given as wake times, where 0 means now."""
        for when in wakes:
            self.at(when)

    async def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a hint; True if one arrived or a timer is due."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self._take():
            delay = deadline - loop.time()
            if delay <= 0:
                return False
            if self._timers:
                delay = min(delay, max(0.0, self._timers[0] - time.time()))
            try:
                async with asyncio.timeout(delay):
                    await self._event.wait()
            except TimeoutError:
                pass
        return True

    def _take(self) -> bool:
        woke, self._hint = self._hint, False
        self._event.clear()
        now = time.time()
        while self._timers and self._timers[0] <= now:
            heapq.heappop(self._timers)
            woke = True
        return woke
