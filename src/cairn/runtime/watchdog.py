"""A thread that notices when the event loop is blocked, and names what is blocking it.

An `async` step that calls `time.sleep`, or crunches numbers without awaiting, stops
everything else in its worker: other runs, timers, commits. Heartbeats go on (they have
a thread of their own), so its runs are not taken over, but the user should know: past a
third of the lease the watchdog logs a warning naming the step, once per stall. What the
loop's thread is executing decides whom to name: when it is cairn's own code (a prune, a
sweep, a store's statement), the warning says so, rather than blaming the user's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
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
        self._loop_thread: int | None = None  # the loop's thread, known once it answers

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (returns at once; the thread ends within a tick)."""
        self._stop.set()

    def _pong(self) -> None:
        self._loop_thread = threading.get_ident()
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
                self._warn(stalled)

    def _warn(self, stalled: float) -> None:
        try:
            task = asyncio.current_task(self._loop)
        except RuntimeError:
            task = None
        label = self._describe(task) if task is not None else None
        coro = task.get_coro() if task is not None else None
        outermost = getattr(coro, "cr_frame", None)  # the task's own first frame
        own, caller = cairn_frames(self._loop_frame(), outermost)
        if own and caller is None:
            # cairn's housekeeping (a prune, a sweep) or a statement of its store, with no
            # user code under way: not the user's to fix.
            where = f", for {label}" if label else ""
            if task is not None and label is None:
                where = f", in task {task.get_name()!r}"
            log.warning(
                "the event loop has been blocked for %.1f s (more than a third of the "
                "lease) by cairn's own code (%s%s), not by workflow or step code: nothing "
                "else in this worker runs meanwhile (heartbeats go on from their own "
                "thread). Please report it to cairn with this line",
                stalled,
                " < ".join(own),
                where,
            )
            return
        if own:  # user code that called cairn, which blocks: both are named
            if label is None:
                label = "code outside any task" if task is None else f"task {task.get_name()!r}"
            label = f"{label}, in cairn's {own[0]} called from {caller}"
        if label is None:
            label = (
                "code outside any task"
                if task is None
                else f"task {task.get_name()!r} (workflow code, not a step)"
            )
        log.warning(
            "the event loop has been blocked for %.1f s (more than a third of the "
            "lease) by %s: nothing else in this worker runs meanwhile (heartbeats go "
            "on from their own thread). Await instead of blocking, or make it a "
            "plain `def` step, which runs in a thread",
            stalled,
            label,
        )

    def _loop_frame(self) -> FrameType | None:
        """What the loop's thread executes now (its innermost Python frame), if known."""
        current = getattr(sys, "_current_frames", None)  # CPython's (and PyPy's)
        if self._loop_thread is None or current is None:
            return None
        frame: FrameType | None = current().get(self._loop_thread)
        return frame


def cairn_frames(
    frame: FrameType | None, outermost: FrameType | None = None, most: int = 4
) -> tuple[list[str], str | None]:
    """The cairn functions `frame` is in when cairn's code is what runs; who called them.

    Only the frames of what the loop runs now count: up to `outermost` (the running
    task's coroutine) or the loop's own machinery (asyncio.events), not whoever started
    the loop. The standard library's frames (asyncio, json, sqlite3's callers...) are
    passed over: the innermost frame outside it decides. When it is cairn's, its callers
    in cairn are named too (innermost first, `most` at most), and so is the first
    function further out that is neither cairn's nor the standard library's (user code
    that called cairn), if any. When it is anyone else's (the user's code, a library it
    called): nothing.
    """
    found: list[str] = []
    while frame is not None:
        if frame.f_globals.get("__name__") in ("asyncio.events", "asyncio.base_events"):
            break  # the loop running a callback: what is under it is not the callback's
        module = str(frame.f_globals.get("__name__", ""))
        top = module.partition(".")[0]
        if top == "cairn":
            if len(found) < most:
                found.append(f"{module}.{frame.f_code.co_qualname}")
        elif top not in sys.stdlib_module_names:
            if not found:
                return [], None  # not cairn's: the user's code, or a library of theirs
            return found, f"{module}.{frame.f_code.co_qualname}"
        if frame is outermost:
            break
        frame = frame.f_back
    return found, None
