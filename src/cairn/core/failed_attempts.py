"""A failed step attempt: what is recorded of it, and what comes next (a retry or the end).

Shared by steps executed here (core/attempts.py) and on a step queue (core/remote_steps.py,
runtime/step_worker.py).
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn import step_failures
from cairn.authoring.retry import Retry, next_delay
from cairn.codecs import coded
from cairn.errors import (
    CairnError,
    Cancelled,
    FatalError,
    RetryableError,
    StepFailed,
    StepTimeout,
)
from cairn.store.records import CANCELLED, AttemptRecord, StepRecord
from cairn.tracebacks import user_traceback

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView


# A retry backoff longer than this parks the run instead of holding its slot in memory.
PARK_BACKOFF_AFTER = 1.0
# `waiting_for` of a run parked in a backoff: "retry:STEP".
RETRY = "retry"


def type_name(exc: BaseException) -> str:
    """Module-qualified class name, e.g. `builtins.ValueError`."""
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}"


@dataclass(frozen=True, slots=True)
class Failure:
    """What is recorded of a failed attempt, wherever it executed (see core/remote_steps.py).

    `timeout` is set only when the attempt failed by running past it; `cause` is the
    class the step raised when this process has it (a remote attempt's: found by name);
    `original` its args and attributes, stored form (see `step_failures.keep`).
    """

    error_type: str
    message: str
    traceback: str
    fatal: bool
    retry_after: float | None
    timeout: float | None
    cause: type[BaseException] | None
    original: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The facts as a JSON object (a remote worker's report of its attempt)."""
        return {
            "error_type": self.error_type,
            "message": self.message,
            "traceback": self.traceback,
            "fatal": self.fatal,
            "retry_after": self.retry_after,
            "timeout": self.timeout,
            "original": self.original,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failure:
        """The facts a remote worker reported (see `to_json`)."""
        error_type = str(data.get("error_type", ""))
        timeout = data.get("timeout")
        original = data.get("original")
        return cls(
            error_type,
            str(data.get("message", "")),
            str(data.get("traceback", "")),
            bool(data.get("fatal", False)),
            data.get("retry_after"),
            None if timeout is None else float(timeout),
            None if timeout is not None else step_failures.resolvable(error_type),
            original if isinstance(original, dict) else None,
        )


def describe_failure(
    exc: Exception, name: str, attempt: int, timeout: float | None, ran_on: float | None = None
) -> Failure:
    """The facts of attempt `attempt` of step `name` that raised `exc`.

    `timeout` is set only when the attempt failed by running past it; `ran_on` when its
    code (a sync step's thread) then ran on for so many seconds. A FatalError, and
    a usage error of cairn's (`usage` on its class: the step's code calls cairn wrongly,
    see cairn.errors), are fatal: the step fails at once, not retried.
    """
    if timeout is not None:
        message = f"step {name!r} attempt {attempt} timed out after {timeout:g}s"
        if ran_on is not None:
            message += f" and was still running for {ran_on:.1f}s"
        return Failure("cairn.errors.StepTimeout", message, message, False, None, timeout, None)
    retry_after = None
    if isinstance(exc, RetryableError) and exc.retry_after is not None:
        retry_after = exc.retry_after.total_seconds()
    return Failure(
        type_name(exc),
        str(exc),
        user_traceback(exc),
        isinstance(exc, FatalError) or (isinstance(exc, CairnError) and exc.usage),
        retry_after,
        None,
        type(exc),
        step_failures.keep(exc),
    )


async def record_failure(
    live: LiveView,
    key: str,
    name: str,
    failed: Failure,
    attempt: int,
    failures: int,
    retry: Retry,
    started: float,
    given: str,
    *,
    worker: str | None = None,
) -> StepFailed | None:
    """Record a failed attempt (begun at `started`), then wait out the backoff or give up.

    `worker` is the one that executed it, if not this run's (a step queue's); else the
    attempt is recorded as this run's worker's, so an operator sees where it failed.
    Returns None to retry, or the StepFailed to raise once retrying is over (recorded as
    the step's outcome). `failures` counts the attempts that failed, this one included
    (attempts interrupted by their worker's end are numbered, but do not count).
    """
    clock = live.env.clock
    now = clock.now()
    timed_out = failed.timeout is not None
    delay = None
    if not failed.fatal:
        delay = next_delay(retry, failures, retry_after=failed.retry_after)
    retry_at = None if delay is None else now + delay
    await live.commit_attempt(
        AttemptRecord(
            live.run.run_id,
            key,
            attempt,
            failed.error_type,
            coded.seal(live.env.serializer, failed.message),
            coded.seal(live.env.serializer, failed.traceback),
            now,
            retry_at,
            started,
            live.run.execution,
            worker=worker or live.env.owner,
        )
    )
    live.flying.pop(key, None)  # over and recorded; the next attempt is not in flight yet
    if delay is not None:
        if delay > PARK_BACKOFF_AFTER and retry_at is not None:
            # A long backoff parks the run, like a sleep: it holds no worker or queue slot,
            # and a crash meanwhile loses nothing (the attempt and its retry time are
            # stored). The run wakes at retry_at and replays into the next attempt.
            raise live.attempt.timer(key, retry_at, f"{RETRY}:{name}")
        await back_off(live, key, delay)
        return None
    kind = StepTimeout if timed_out else StepFailed
    # Also an instance of the step's own exception class where a replay can do the same.
    failure = step_failures.failure(
        kind,
        None if timed_out else failed.cause,
        failed.original,
        step_name=name,
        attempts=attempt,
        error_type=failed.error_type,
        error_message=failed.message,
        traceback=failed.traceback,
        fatal=failed.fatal,
    )
    recorded = failure.to_dict()
    if failed.original is not None and not timed_out:
        recorded["original"] = failed.original  # what a replay restores (step_failures.from_dict)
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
            error=coded.seal(live.env.serializer, json.dumps(recorded)),
            input=given,
        )
    )
    return failure


async def record_cancelled(
    live: LiveView, key: str, name: str, attempt: int, started: float
) -> None:
    """Record attempt `attempt` of step `name` as ended cancelled: its code stopped for a cancel.

    `cairn.check_cancelled()` (or a `cancel_stops` block) raised in the step: the step has
    no outcome (the workflow gets Cancelled at its call, recorded as the run's `cancel`
    entry), but the attempt ran, so the history shows it as an interrupted one is shown.
    """
    await live.commit_attempt(cancelled_attempt(live, key, name, attempt, started))


def cancelled_attempt(
    live: LiveView, key: str, name: str, attempt: int, started: float
) -> AttemptRecord:
    """The record of attempt `attempt` of step `name` ended cancelled (see record_cancelled)."""
    reason = live.interrupts.reason
    why = "" if reason in ("", "cancelled") else f" ({reason})"
    return AttemptRecord(
        live.run.run_id,
        key,
        attempt,
        type_name(Cancelled()),
        coded.seal(live.env.serializer, f"step {name!r} stopped: its run was cancelled{why}"),
        "",
        live.env.clock.now(),
        None,
        started,
        live.run.execution,
        outcome=CANCELLED,
    )


async def back_off(live: LiveView, key: str, seconds: float) -> None:
    """Wait out a short backoff of step `key` in memory (counted in `live.attempt.backing_off`).

    The backoff is a durable point: the failed attempt and its retry time are stored. A
    cancel or pause that comes meanwhile ends the wait and is met here, before the next
    attempt starts (unless held off by `cairn.shield()`, or in a delivered cancel's
    cleanup: then the wait goes on). A worker stopping meanwhile takes the run back
    before the next attempt starts: the run's next worker waits out what is left.
    """
    interrupts = live.interrupts
    clock = live.env.clock
    live.attempt.backing_off += 1
    try:
        until = clock.now() + seconds
        while not (interrupts.handing_back or interrupts.met()):
            left = until - clock.now()
            if left <= 0:
                break
            await _wait(live, left)
    finally:
        live.attempt.backing_off -= 1
    await live.point(key)  # acts on a hand back, cancel or pause (see Interrupts.checkpoint)


async def _wait(live: LiveView, seconds: float) -> None:
    """Sleep `seconds` on the engine's clock, or less if a cancel or pause comes."""
    loop = live.env.loop
    woken: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    undo = live.interrupts.on_request(wake)
    sleep = loop.create_task(live.env.clock.sleep(seconds))
    try:
        await asyncio.wait((sleep, woken), return_when=asyncio.FIRST_COMPLETED)
    finally:
        undo()
        sleep.cancel()
        woken.cancel()


def by_key(attempts: list[AttemptRecord], execution: int) -> dict[str, list[AttemptRecord]]:
    """The attempts of this execution by step key (a retry's execution starts afresh)."""
    grouped: dict[str, list[AttemptRecord]] = defaultdict(list)
    for attempt in attempts:
        if attempt.execution == execution:
            grouped[attempt.key].append(attempt)
    return dict(grouped)
