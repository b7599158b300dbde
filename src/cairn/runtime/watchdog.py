"""A thread that notices when the event loop is blocked, and names the step blocking it.

An `async` step that calls `time.sleep`, or crunches numbers without awaiting, stops
everything else in its worker: other runs, timers, commits. Heartbeats go on (they have
a thread of their own), so its runs are not taken over, but the user should know: past a
third of the lease the watchdog logs a warning naming the step, once per stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from cairn.observability import logcontext

log = logcontext.logger("cairn.worker")


class LoopWatchdog:
    """Pings the loop from a thread; warns when a ping waits longer than `limit`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        limit: float,
        describe: Callable[[asyncio.Task[Any]], str | None],
    ) -> None:
        self._loop = loop
        self.limit = limit
        self._describe = describe  # names what a task runs (a step of a run), if it can
        self._tick = min(0.5, limit / 4)
        self._answered = time.monotonic()
        self._resumed = 0.0  # when the loop last answered again after a block
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="cairn-watchdog", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (returns at once; the thread ends within a tick)."""
        self._stop.set()

    def _pong(self) -> None:
        now = time.monotonic()
        if now - self._answered > 2 * self._tick:
            self._resumed = now  # the first answer after a block
        self._answered = now

    def responsive_since(self) -> float:
        """When (time.monotonic()) the loop last began answering again; now while blocked.

        Any thread. Waits for the database are aged from this (store/waits.py): replies
        that came while the loop was blocked are read once it runs again.
        """
        now = time.monotonic()
        if now - self._answered > 2 * self._tick:
            return now
        return self._resumed

    def _watch(self) -> None:
        warned = False
        woke = time.monotonic()
        while not self._stop.wait(self._tick):
            slept, woke = time.monotonic() - woke, time.monotonic()
            if slept > self._tick + self.limit:
                # This thread did not run either: the whole process stood still (SIGSTOP,
                # a paused container or VM), or native code held the GIL. No step is to
                # blame, and other workers may have taken this one's runs meanwhile.
                log.warning(
                    "this worker stood still for %.1f s (stopped, paused, or the GIL held): "
                    "its runs may have been taken over meanwhile, and their attempts here "
                    "end at their next write",
                    slept - self._tick,
                )
                self._answered = woke
            with contextlib.suppress(RuntimeError):  # the loop closed
                self._loop.call_soon_threadsafe(self._pong)
            stalled = time.monotonic() - self._answered - self._tick
            if stalled < self.limit:
                warned = False
            elif not warned:
                warned = True
                log.warning(
                    "the event loop has been blocked for %.1f s (more than a third of the "
                    "lease) by %s: nothing else in this worker runs meanwhile (heartbeats go "
                    "on from their own thread). Await instead of blocking, or make it a "
                    "plain `def` step, which runs in a thread",
                    stalled,
                    self._blocker(),
                )

    def _blocker(self) -> str:
        try:
            task = asyncio.current_task(self._loop)
        except RuntimeError:
            task = None
        if task is None:
            return "code outside any task"
        label = self._describe(task)
        if label is not None:
            return label
        return f"task {task.get_name()!r} (workflow code, not a step)"
