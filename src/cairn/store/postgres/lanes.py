"""The lock of a group-commit lane, which knows whether anyone is about to take it."""

from __future__ import annotations

import asyncio
from types import TracebackType


class LaneLock:
    """An asyncio.Lock that counts the tasks holding it or waiting for it.

    `asyncio.Lock.locked()` is False from a release until the woken waiter runs, so a lane
    could look free while it was promised to that waiter. A write that took such a lane
    waited behind the waiter; the next write saw the same and queued behind it too. Under
    many runs at once every write then committed alone, one after another (a quarter of
    the speed). A lane is free only when nobody holds it or waits for it.
    """

    __slots__ = ("_lock", "_users")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._users = 0

    def free(self) -> bool:
        """Nobody holds this lane or waits for it: taking it now waits for no one."""
        return self._users == 0

    async def acquire(self) -> None:
        """Wait for the lane and hold it."""
        self._users += 1
        try:
            await self._lock.acquire()
        except BaseException:
            self._users -= 1
            raise

    def release(self) -> None:
        """Let the lane go (to the first waiter, if any)."""
        self._lock.release()
        self._users -= 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
