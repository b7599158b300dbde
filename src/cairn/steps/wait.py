"""Waiting for a condition: `wait.until(check, every=, timeout=)` and `wait.until_tag_equals`.

`until` is one durable step whose attempts are the polls: a check that is not yet true
fails its attempt (`NotYet`), and the step's retry policy, fixed at `every` apart, runs
the next one. So the run parks between polls (holding no worker), each poll adds one
attempt record and no history entry, and the step's one entry records the outcome.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from cairn import durations
from cairn.authoring import usage
from cairn.authoring.retry import Retry, coerce
from cairn.errors import FatalError, InvalidArguments, InvalidValue
from cairn.steps import calling, tags
from cairn.steps.errors import NotYet, WaitTimeout

__all__ = ["until", "until_tag_equals"]


@usage.checked("cairn.steps.wait.until")
def until(
    check: Callable[[], Any],
    *,
    every: Any = "30s",
    timeout: Any = "1h",
    name: str | None = None,
) -> Any:
    """Poll `check` durably until it returns something truthy, and return that.

    The first poll runs at once, then one every `every`, `timeout // every + 1` polls in
    all (the timeout counts polls, not the time the checks take). Between polls longer
    than a second apart the run is parked (SLEEPING, no worker held); a crash or a
    restart meanwhile resumes the polling where it was.

    Args:
        check: A function or coroutine function of no arguments, run in a step (so it may
            do I/O, including the other ready steps, which run inside it as plain calls).
            What it returns must be storable. An exception it raises counts as a poll
            that is not yet true (and is shown in the poll's attempt), except
            `cairn.FatalError`, which ends the wait at once.
        every: Time between polls (a duration: "30s", "5 minutes", seconds).
        timeout: How long to poll (a duration); 0 polls once.
        name: The step's name in the history (default "wait.until").

    Returns:
        The truthy value `check` returned (an awaitable of it in an async workflow).

    Raises:
        WaitTimeout: No poll was true within `timeout` (the last value or error named).
        ValueError, TypeError: A bad argument, at the call.
    """
    if not callable(check):
        raise InvalidArguments(f"wait.until: check must be a function, got {check!r}")
    gap = durations.seconds(every, what="wait.until every")
    if gap <= 0:
        raise InvalidValue(f"wait.until: every must be positive, got {every!r}")
    limit = durations.seconds(timeout, what="wait.until timeout")
    polls = int(limit / gap + 1e-9) + 1  # 10s / 0.1s is 100 gaps, whatever floats say
    is_async = inspect.iscoroutinefunction(check)
    if not calling.in_workflow():
        polling = _polling_async if is_async else _polling_sync
        return calling.plain(polling, (check, polls, gap))
    # Fixed gaps and no jitter: the polls are the step's attempts.
    policy = Retry(max_attempts=polls, delay=gap, backoff=1.0, max_delay=gap, jitter=0.0)

    async def poll_async() -> Any:
        return _verdict(await _poll_async(check), calling.attempt(), polls, gap)

    def poll_sync() -> Any:
        return _verdict(_poll_sync(check), calling.attempt(), polls, gap)

    body = poll_async if is_async else poll_sync
    return calling.call(name or "wait.until", body, (), retries=policy)


@usage.checked("cairn.steps.wait.until_tag_equals")
def until_tag_equals(
    path: str,
    expected: Any,
    timeout_ms: float = 10000,
    poll_ms: float = 250,
    *,
    name: str | None = None,
    retries: Retry | int | None = None,
) -> Any:
    """Wait until a tag reads `expected`, polling every `poll_ms` for `timeout_ms`.

    One durable step that holds one connection to the tag server and polls in memory
    (for waits of minutes or more, use `until` with a check that calls `tags.read`).
    Numbers compare with a relative tolerance of 1e-6.

    Returns:
        The value read (an awaitable of it in an async workflow).

    Raises:
        WaitTimeout: The tag did not read `expected` in time (the last value named).
        TagError, TagUnavailable: As for `cairn.steps.tags.read`.
    """
    if not isinstance(path, str) or not path.strip():
        raise InvalidValue(
            f"wait.until_tag_equals: a tag path must be a non-empty string, got {path!r}"
        )
    limit = calling.positive_ms(timeout_ms, "wait.until_tag_equals timeout_ms")
    every = calling.positive_ms(poll_ms, "wait.until_tag_equals poll_ms")

    async def body(path: str, expected: Any) -> Any:
        async with tags.session() as provider:
            found, last = await tags.poll_equal(provider, path, expected, limit, every)
        if found:
            return last
        raise WaitTimeout(
            f"tag {path!r} did not read {expected!r} within {timeout_ms:g} ms "
            f"(last read: {last!r})",
            last=last,
        )

    policy = tags.DEFAULT_RETRY if retries is None else coerce(retries)
    return calling.call(name or "wait.until_tag_equals", body, (path, expected), retries=policy)


# What one poll saw: (true yet, the value returned, the exception raised).
_Seen = tuple[bool, Any, Exception | None]


async def _poll_async(check: Callable[[], Awaitable[Any]]) -> _Seen:
    try:
        value = await check()
    except FatalError:
        raise
    except Exception as exc:
        return False, None, exc
    return bool(value), value, None


def _poll_sync(check: Callable[[], Any]) -> _Seen:
    try:
        value = check()
        if inspect.isawaitable(value):  # a lambda around a ready step, say
            value = asyncio.run(_awaited(value))
    except FatalError:
        raise
    except Exception as exc:
        return False, None, exc
    return bool(value), value, None


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _verdict(seen: _Seen, poll: int, polls: int, gap: float) -> Any:
    """The value of a true poll; else NotYet (poll again) or, after the last, WaitTimeout."""
    done, value, error = seen
    if done:
        return value
    said = f"check returned {value!r}" if error is None else f"check raised {_said(error)}"
    if poll >= polls:
        raise WaitTimeout(
            f"wait.until gave up after {polls} poll(s) {gap:g}s apart: {said}", last=value
        ) from error
    raise NotYet(f"poll {poll} of {polls}: {said}") from error


async def _polling_async(check: Callable[[], Awaitable[Any]], polls: int, gap: float) -> Any:
    """Outside workflow code: the polls in a loop, sleeping in memory between them."""
    poll = 1
    while True:
        try:
            return _verdict(await _poll_async(check), poll, polls, gap)
        except NotYet:
            calling.check_cancelled()
            await asyncio.sleep(gap)
        poll += 1


def _polling_sync(check: Callable[[], Any], polls: int, gap: float) -> Any:
    """`_polling_async` for a plain function, where no event loop runs."""
    poll = 1
    while True:
        try:
            return _verdict(_poll_sync(check), poll, polls, gap)
        except NotYet:
            calling.check_cancelled()
            time.sleep(gap)
        poll += 1


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
