"""The starts `cairn.schedule_workflow` left pending in one attempt, and their handles.

Held by the attempt (LiveAttempt.scheduled; ReplayRun keeps its own), apart from
core/scheduled_starts.py, which writes them: the attempt owns what must be awaited before
it ends without importing the helpers that reach it through LiveView.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any

from cairn.core.signals import Unwind


class ScheduledRun:
    """What `cairn.schedule_workflow` returns in an async workflow: `await` it for the id.

    The start takes effect whether or not it is awaited.
    """

    __slots__ = ("_done", "awaited")

    def __init__(self, done: asyncio.Future[str]) -> None:
        self._done = done
        self.awaited = False  # a failure the code awaited is the code's to handle

    def __await__(self) -> Generator[Any, None, str]:
        self.awaited = True
        return self._done.__await__()

    def __repr__(self) -> str:
        done = self._done
        ok = done.done() and not done.cancelled() and done.exception() is None
        return f"ScheduledRun({done.result()!r})" if ok else "ScheduledRun(<starting>)"


class PendingStarts:
    """The starts of one attempt still being written, awaited before the attempt ends."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[tuple[ScheduledRun, asyncio.Task[str]]] = []

    def __bool__(self) -> bool:
        """True while starts are pending (`drain` has something to wait for)."""
        return bool(self._pending)

    def add(self, loop: asyncio.AbstractEventLoop, write: Coroutine[Any, Any, str]) -> ScheduledRun:
        """Run `write` in a task of its own; its handle."""
        task = loop.create_task(write)
        task.add_done_callback(_retrieved)
        handle = ScheduledRun(task)
        self._pending.append((handle, task))
        return handle

    async def drain(self) -> None:
        """Wait for every pending start; raise the first failure no code awaited.

        A cancelled start was not recorded: the attempt unwinds, and the next replays it.
        """
        while self._pending:
            batch, self._pending = self._pending, []
            await asyncio.wait([task for _, task in batch])
            for handle, task in batch:
                if task.cancelled():
                    raise Unwind()
                failure = task.exception()
                if failure is not None and not handle.awaited:
                    raise failure


async def settled(pending: PendingStarts, code: Awaitable[Any]) -> Any:
    """Await an async workflow's `code`, then every start it left pending.

    However the code ended (returned, parked, continued as new, failed): a start that
    failed wins, since the code went on as if it had happened. The engine's executor
    does the same inline (core/executor.py), a coroutine level less on a run's path.
    """
    try:
        value = await code
    except asyncio.CancelledError:
        raise  # the attempt is being torn down: unfinished starts are not recorded
    except BaseException:
        if pending:
            await pending.drain()
        raise
    if pending:
        await pending.drain()
    return value


def _retrieved(task: asyncio.Task[str]) -> None:
    # Read here so that asyncio never logs a failure `drain` raises or the code awaited.
    if not task.cancelled():
        task.exception()
