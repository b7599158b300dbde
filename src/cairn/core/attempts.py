"""New step execution: attempts with timeout and retry, each failure recorded."""

from __future__ import annotations

import asyncio
import contextvars
import json
import traceback
from typing import TYPE_CHECKING, Any

from cairn.authoring import context
from cairn.authoring.retry import Retry, next_delay
from cairn.errors import FatalError, RetryableError, StepFailed, StepTimeout
from cairn.store.records import AttemptRecord, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.step import StepDef
    from cairn.core.live_run import LiveRun


_SCALARS = frozenset({str, int, float, bool, type(None)})


def type_name(exc: BaseException) -> str:
    """Module-qualified class name, e.g. `builtins.ValueError`."""
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


async def _call(
    live: LiveRun, step: StepDef[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    token = context.mark_in_step()
    fn = step.fn
    try:
        if step.is_async:
            return await fn(*args, **kwargs)
        loop = live.env.loop
        # run_in_executor does not carry contextvars over: copy them so current_run() works.
        ctx = contextvars.copy_context()
        result = await loop.run_in_executor(live.env.threads, lambda: ctx.run(fn, *args, **kwargs))
        if asyncio.iscoroutine(result):  # a plain function that returned a coroutine
            result = await result
        return result
    finally:
        context.unmark_in_step(token)


async def run_new_step(
    live: LiveRun,
    key: str,
    step: StepDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Execute a step that has no recorded outcome; commit its result before returning."""
    name, retry, timeout = step.name, step.retry, step.timeout
    clock = live.env.clock
    prior = live.prior_attempts.get(key, ())
    attempt = len(prior)
    started = clock.now()
    if prior and prior[-1].retry_at is not None:
        # Recovered during a backoff: wait only what is left of it.
        await clock.sleep(prior[-1].retry_at - clock.now())
    while True:
        attempt += 1
        limit = None
        try:
            if timeout is None:
                value = await _call(live, step, args, kwargs)
            else:
                async with asyncio.timeout(timeout) as limit:
                    value = await _call(live, step, args, kwargs)
        except Exception as exc:
            timed_out = limit is not None and limit.expired()
            failure = await _record_failure(
                live, key, name, exc, attempt, retry, timeout if timed_out else None, started
            )
            if failure is not None:
                raise failure from None
            continue
        text = live.env.serializer.dumps(value, what=f"result of step {name!r}")
        await live.commit_step(
            StepRecord(
                run_id=live.run.run_id,
                seq=live.journal.allocate_seq(),
                key=key,
                kind="step",
                name=name,
                status="completed",
                attempts=attempt,
                started_at=started,
                finished_at=clock.now(),
                result=text,
            )
        )
        if type(value) in _SCALARS:
            return value
        # Hand the workflow what a replay will: the stored form. A dataclass that replay
        # cannot import, or a Counter, would otherwise change type when the run recovers.
        return live.env.serializer.loads(text)


async def _record_failure(
    live: LiveRun,
    key: str,
    name: str,
    exc: Exception,
    attempt: int,
    retry: Retry,
    timeout: float | None,
    started: float,
) -> StepFailed | None:
    """Record a failed attempt, then wait out the backoff or give up.

    Returns None to retry, or the StepFailed to raise once retrying is over (recorded as
    the step's outcome).

    `timeout` is set only when this attempt failed by running past it.
    """
    clock = live.env.clock
    now = clock.now()
    timed_out = timeout is not None
    if timed_out:
        error_type = "cairn.errors.StepTimeout"
        message = f"step {name!r} attempt {attempt} timed out after {timeout:g}s"
        text = message
    else:
        error_type = type_name(exc)
        message = str(exc)
        text = "".join(traceback.format_exception(exc))
    fatal = isinstance(exc, FatalError)
    delay = None
    if not fatal:
        retry_after = None
        if isinstance(exc, RetryableError) and exc.retry_after is not None:
            retry_after = exc.retry_after.total_seconds()
        delay = next_delay(retry, attempt, retry_after=retry_after)
    retry_at = None if delay is None else now + delay
    await live.commit_attempt(
        AttemptRecord(live.run.run_id, key, attempt, error_type, message, text, now, retry_at)
    )
    if delay is not None:
        await clock.sleep(delay)
        return None
    kind = StepTimeout if timed_out else StepFailed
    failure = kind(
        step_name=name,
        attempts=attempt,
        error_type=error_type,
        error_message=message,
        traceback=text,
        fatal=fatal,
    )
    await live.commit_step(
        StepRecord(
            run_id=live.run.run_id,
            seq=live.journal.allocate_seq(),
            key=key,
            kind="step",
            name=name,
            status="failed",
            attempts=attempt,
            started_at=started,
            finished_at=clock.now(),
            error=json.dumps(failure.to_dict()),
        )
    )
    return failure
