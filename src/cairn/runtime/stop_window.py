"""The time a stop has: a grace for work in flight, then a window to hand back the rest.

A second signal (`hurry`) ends the grace at once and shrinks the window to HURRIED
seconds. Used by the step worker's stop; the run worker keeps its own (runtime/worker.py).
"""

from __future__ import annotations

import asyncio
from typing import Any


class StopWindow:
    """The deadlines of one stop, on the loop's clock; `hurry` may come at any time."""

    def __init__(self, *, hand_back: float, hurried: float) -> None:
        self.hand_back = hand_back
        self.hurried = hurried
        self._hurry = asyncio.Event()
        self._hand_back_ends: float | None = None  # once the hand-backs have begun

    def hurry(self) -> None:
        """End the grace now; what is left of the hand-back window shrinks to `hurried`."""
        self._hurry.set()
        if self._hand_back_ends is not None:
            now = asyncio.get_running_loop().time()
            self._hand_back_ends = min(self._hand_back_ends, now + self.hurried)

    async def grace(self, tasks: set[asyncio.Future[Any]], seconds: float) -> None:
        """Until `tasks` are done, `seconds` have passed or `hurry` is called."""
        await self._until(tasks, asyncio.get_running_loop().time() + seconds)

    async def handing_back(self, tasks: set[asyncio.Future[Any]]) -> None:
        """Until `tasks` are done or the hand-back window (which begins now) ends."""
        now = asyncio.get_running_loop().time()
        self._hand_back_ends = now + (self.hurried if self._hurry.is_set() else self.hand_back)
        await self._until(tasks, self._hand_back_ends)

    async def _until(self, tasks: set[asyncio.Future[Any]], deadline: float) -> None:
        loop = asyncio.get_running_loop()
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            pending = {task for task in tasks if not task.done()}
            while pending:
                if self._hand_back_ends is not None:
                    deadline = min(deadline, self._hand_back_ends)  # follows `hurry`
                elif hurry.done():
                    return  # the grace ends now
                left = deadline - loop.time()
                if left <= 0:
                    return
                waiting = pending if hurry.done() else pending | {hurry}
                _, pending = await asyncio.wait(
                    waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(hurry)
        finally:
            hurry.cancel()
