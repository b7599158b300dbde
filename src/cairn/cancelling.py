"""Stopping tasks that may be waiting on a database that does not answer.

A task cancelled inside a psycopg query does not end at once: psycopg asks the server to
cancel the query and waits for that (5 s), then waits for the query to end (5 s more).
A server behind a hung network path answers neither, so each such task took 10 s to stop,
one after the other. Cancelled again meanwhile, psycopg closes the connection and lets
the task end: `stop` cancels, then cancels again whatever still runs after a moment.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# Seconds a cancelled task has to end before it is cancelled again. A query on a server
# that answers is cancelled in milliseconds; only a silent one takes longer.
PATIENCE = 0.25


async def stop(
    tasks: Iterable[asyncio.Future[Any]], *, within: float = 5.0, patience: float = PATIENCE
) -> set[asyncio.Future[Any]]:
    """Cancel `tasks` and wait until they end, cancelling again every `patience` seconds.

    Returns the tasks still running after `within` seconds (none, unless a task swallows
    every cancellation). Their outcomes are retrieved, so that none is reported as an
    exception never retrieved.
    """
    tasks = list(tasks)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    pending: set[asyncio.Future[Any]] = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(patience, left))
    for task in tasks:
        if task.done() and not task.cancelled():
            with contextlib.suppress(BaseException):
                task.exception()
    return pending


async def bounded(work: Awaitable[T], within: float) -> T:
    """Await `work` for up to `within` seconds; then stop it (see `stop`) and raise TimeoutError.

    Unlike asyncio.timeout, the work is cancelled as often as it takes to end.
    """
    task = asyncio.ensure_future(work)
    stopped = False
    try:
        await asyncio.wait({task}, timeout=max(0.0, within))
    finally:
        if not task.done():
            stopped = True
            await stop([task])
    # A gather stopped ends with CancelledError as its exception, not cancelled; a task
    # that swallows every cancellation is left running (see `stop`).
    if stopped and (
        not task.done() or task.cancelled() or isinstance(task.exception(), asyncio.CancelledError)
    ):
        raise TimeoutError(f"no answer within {within:g} s")
    return task.result()
