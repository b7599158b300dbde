"""Stream bells: "stream (run, name) has new items", rung by writers, awaited by readers.

One per store object (`store.stream_bells()`): this process's appends ring it, and on
PostgreSQL so does NOTIFY cairn_streams from other processes. A ring is a hint: the
reader reads the stream again, whatever it finds, and polls besides.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class StreamBells:
    """Readers waiting for a stream of one store, by (run id, name)."""

    def __init__(self) -> None:
        # Each reader's event with its loop: writers may ring from another thread.
        self._waiting: defaultdict[
            tuple[str, str], set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]
        ] = defaultdict(set)

    def ring(self, run_id: str, name: str) -> None:
        """Wake this process's readers of stream `name` of run `run_id` (any thread's loop)."""
        for loop, event in list(self._waiting.get((run_id, name), ())):
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    async def wait(self, run_id: str, name: str, timeout: float) -> None:
        """Return when the stream is rung, or after `timeout` seconds."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        key = (run_id, name)
        self._waiting[key].add(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter[1].wait()
        except TimeoutError:
            pass
        finally:
            waiting = self._waiting.get(key)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiting[key]
