"""A sync step's attempt in a thread or a child process; the wait for an overrunning thread.

A thread cannot be stopped: a timeout ends the wait for it, not its code. The thread is
then kept, by the caller's key, in an `overrunning` map, and the step's next attempt (or
its final failure) waits in `outlived` until it has returned, so attempts of one step
never overlap. Shared by steps executed where their run executes (core/attempts.py) and
on a step queue's worker (runtime/step_worker.py). `isolation="process"` runs the attempt
in a child process instead, killed at the timeout (core/isolated_steps.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import time
from collections.abc import Callable
from typing import Any

Overrunning = dict[str, "concurrent.futures.Future[Any]"]


async def call(
    threads: concurrent.futures.Executor,
    where: str,
    fn: Callable[..., Any],
    args: Any,
    kwargs: Any,
    *,
    isolation: str,
    overrunning: Overrunning,
    key: str,
    track: Callable[[concurrent.futures.Future[Any]], None] | None = None,
) -> Any:
    """`fn(*args, **kwargs)` in a thread of `threads` (a child process if `isolation` says).

    If this is cancelled (a timeout, mostly) while the thread runs, the thread is kept in
    `overrunning[key]` for `outlived`. `track` is told of the thread once it is started.
    """
    if isolation == "process":
        # Loaded here: multiprocessing is a few percent of `import cairn`, and most
        # processes never isolate a step.
        from cairn.core import isolated_steps

        return await isolated_steps.call(where, fn, tuple(args), kwargs)
    # The executor does not carry contextvars over: copy them so current_run() works.
    ctx = contextvars.copy_context()
    running = threads.submit(lambda: ctx.run(fn, *args, **kwargs))
    if track is not None:
        track(running)
    try:
        result = await asyncio.wrap_future(running)
    except asyncio.CancelledError:
        overrunning[key] = running
        raise
    if asyncio.iscoroutine(result):  # a plain function that returned a coroutine
        result = await result
    return result


async def outlived(overrunning: Overrunning, key: str) -> float | None:
    """Wait until the thread kept for `key` (a timed-out attempt's) has returned.

    Returns the seconds it ran on from now (None if there was none, or it had returned).
    Cancelling this ends the wait, not the thread.
    """
    running = overrunning.pop(key, None)
    if running is None or running.done():
        return None
    began = time.monotonic()
    await asyncio.wait([asyncio.wrap_future(running)])
    return time.monotonic() - began
