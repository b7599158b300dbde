"""How a ready step runs: a durable step in workflow code, a plain call anywhere else.

Also what the steps' own code asks of the run around it (its resources, its step's
idempotency key, a cancellation), each answered sensibly outside a run too.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from cairn import config
from cairn.authoring import context, primitives
from cairn.authoring.retry import Retry
from cairn.authoring.step import run_step
from cairn.errors import InvalidValue
from cairn.names import check_name


def call(
    name: str,
    body: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    retries: Retry,
    timeout: float | None = None,
) -> Any:
    """Run `body(*args)` as the durable step `name`, or as a plain call outside workflow code.

    In workflow code the step is recorded, retried by `retries` and replayed like any
    other (`args` become its recorded input): an awaitable in an async workflow, the value
    in a sync one. Outside a run, and inside a step's own code (a fluent stage, a
    `@cairn.step`), `body` runs once, at once: its errors steer the enclosing step's
    retries. There the call gives an awaitable when an event loop runs in this thread, and
    the value otherwise.
    """
    check_name(name, "step name")
    if context.active() is not None:
        return run_step(name, body, *args, retries=retries, timeout=timeout)
    return plain(body, args)


def plain(body: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """`body(*args)` now: awaitable where an event loop runs, the value where none does."""
    try:
        asyncio.get_running_loop()
        looping = True
    except RuntimeError:
        looping = False
    if inspect.iscoroutinefunction(body):
        coro = body(*args)
        return coro if looping else asyncio.run(coro)
    if looping:
        return asyncio.to_thread(body, *args)
    return body(*args)


def in_workflow() -> bool:
    """True in workflow code (where a ready step is durable), False elsewhere."""
    return context.active() is not None


def attempt() -> int:
    """The attempt of the step whose code runs now (counting from 1); 1 outside one."""
    frame = context.step_frame()
    return 1 if frame is None else frame[2]


def resources() -> config.Resources:
    """The databases and tag provider of the run this code is part of (else pyproject's)."""
    ctx = context.in_run()
    return config.resources() if ctx is None else ctx.resources()


def idempotency_key() -> str | None:
    """The key of the step whose code runs now (stable across its retries), or None."""
    if context.step_frame() is None or context.in_run() is None:
        return None
    return primitives.current_step().idempotency_key


def check_cancelled() -> None:
    """Raise `cairn.Cancelled` if the run this code is part of was cancelled."""
    if context.in_run() is not None:
        primitives.check_cancelled()


def cancel_stops(stop: Callable[[], None]) -> contextlib.AbstractContextManager[None]:
    """While the block runs, a cancel of the run calls `stop()` (see `context.cancel_stops`)."""
    return context.cancel_stops(stop)


def positive_ms(value: Any, what: str) -> float:
    """`value` milliseconds as seconds; InvalidValue naming `what` unless a positive number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidValue(f"{what} must be a positive number of milliseconds, got {value!r}")
    if value == float("inf"):
        raise InvalidValue(f"{what} must be a finite number of milliseconds, got {value!r}")
    return float(value) / 1000
