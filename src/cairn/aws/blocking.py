"""Running a coroutine to its end from code that must block: the SDK's operations are calls.

The SDK runs a step's or a child context's function and checkpoints what it returns, so
an async step or an async child workflow is run to its end right there. Where an event
loop already runs in this thread (an async workflow's own), it is run on a thread of its
own, in a copy of this context (the run, the step being executed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any


def run_to_end(make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """The result of the coroutine `make()` returns, run in a loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    if not running:
        return asyncio.run(make())
    here = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cairn-aws") as pool:
        return pool.submit(here.run, lambda: asyncio.run(make())).result()


def call_within(fn: Callable[[], Any], seconds: float, on_timeout: Callable[[], Exception]) -> Any:
    """`fn()`, or the exception `on_timeout()` makes once `seconds` pass.

    A plain function cannot be stopped: it runs on in its thread, as a sync step's
    attempt past its timeout does under `cairn worker`.
    """
    here = contextvars.copy_context()
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cairn-aws-step")
    future = pool.submit(here.run, fn)
    pool.shutdown(wait=False)
    try:
        return future.result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        raise on_timeout() from None
