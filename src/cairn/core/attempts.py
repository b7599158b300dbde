"""New step execution: attempts with timeout and retry, each failure recorded."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from cairn import blobs
from cairn.authoring import context
from cairn.authoring.retry import Retry
from cairn.authoring.transaction import TransactionDef
from cairn.blobs.offloaded import Offloaded
from cairn.blobs.reference import PREFIX, BlobUnwritable
from cairn.codecs import coded
from cairn.core import durable, step_input, streams, sync_steps, transaction_steps
from cairn.core.failed_attempts import (
    PARK_BACKOFF_AFTER,
    RETRY,
    back_off,
    describe_failure,
    record_cancelled,
    record_failure,
)
from cairn.errors import Cancelled, SerializationError, StepFailed, StoreError, StoreRefused
from cairn.store.programs import journal as journal_ops
from cairn.store.protocol import LeaseLost
from cairn.store.records import INTERRUPTED, StepRecord

if TYPE_CHECKING:
    from cairn.authoring.definitions import StepDef
    from cairn.core.live_view import LiveView


_SCALARS = frozenset({str, int, float, bool, type(None)})


def trusted(live: LiveView) -> bool:
    """True if this attempt surely still holds its run (see core/tenure.py).

    No step body starts unless it does: a clock read, while the worker's heartbeat is
    fresh; otherwise `LiveAttempt.hold_lease` makes sure first.
    """
    tenure = live.env.tenure
    if tenure is None:
        return True
    until, epoch = tenure.state  # Tenure.trusts, inlined: this runs for every step
    return epoch == live.attempt.epoch and time.monotonic() < until


async def _call(
    live: LiveView,
    step: StepDef[Any, Any],
    key: str,
    attempt: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    if not trusted(live):
        await live.attempt.hold_lease()
    token = context.mark_in_step((step.name, key, attempt))
    fn = step.fn
    try:
        if isinstance(step, TransactionDef):
            return await transaction_steps.call(live, step, args, kwargs)
        if step.is_async:
            return await fn(*args, **kwargs)
        return await sync_steps.call(
            live.env.threads,
            f"step {step.name!r}",
            fn,
            args,
            kwargs,
            isolation=step.isolation,
            overrunning=live.attempt.overrunning,
            key=key,
            track=live.attempt.track_thread,  # the attempt is not over while its thread runs
        )
    finally:
        context.unmark_in_step(token)


async def run_new_step(
    live: LiveView,
    key: str,
    step: StepDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    first: tuple[BaseException, float, str] | None = None,
) -> Any:
    """Execute a step that has no recorded outcome; commit its result before returning.

    The outcome's entry carries the step's input and the start of the attempt that ended
    it; each failed attempt is recorded with its own start. `first`: its first attempt
    already ran (core/common_steps.py) and raised this, begun then, with this input.
    """
    name, timeout = step.name, step.timeout
    # The common case, an async step without a timeout, is awaited here, not via _call.
    direct = step.is_async and timeout is None
    transactional = False
    if isinstance(step, TransactionDef):
        transactional = True
        transaction_steps.check_durable(live, step)
        direct = False
    clock = live.env.clock
    prior = live.prior_attempts.get(key, ())
    attempt = len(prior)
    # An interrupted attempt (its worker died or lost the run) has a number but spends
    # none of the retry policy's attempts: the step did not fail, its worker did.
    spared = 0
    if prior:
        spared = sum(1 for earlier in prior if earlier.outcome == INTERRUPTED)
        if prior[-1].outcome == INTERRUPTED:
            # Its worker died: what that attempt streamed is void before this one streams.
            await streams.void(live, key, attempt + 1, own=False)
        if prior[-1].retry_at is not None:
            # Woken (or recovered) in a backoff: wait only what is left of it.
            left = prior[-1].retry_at - clock.now()
            if left > PARK_BACKOFF_AFTER:
                raise live.attempt.timer(key, prior[-1].retry_at, f"{RETRY}:{name}")
            await back_off(live, key, left)
    # Serialized before the first attempt: what the step was given, whatever it mutates.
    given = first[2] if first is not None else step_input.NOT_KEPT
    if first is None and step.keep_input:
        given = step_input.serialize(live.env.serializer, args, kwargs, hidden=live.hook_tokens)
    run_scope = live.observed
    # The attempt in flight, for the worker's heartbeat to publish (runtime/in_flight.py):
    # an entry in a dict, no write of its own. The step removes it at its end.
    flying = live.flying
    tenure = live.env.tenure  # `trusted`, inlined below for the direct path
    while True:
        attempt += 1
        started = clock.now() if first is None else first[1]
        flying[key] = (name, attempt, started)
        limit = None
        observed = None if run_scope is None else run_scope.step(key, name, attempt)
        try:
            if first is not None:  # what it raised is handled as any attempt's failure
                failed, first = first[0], None
                raise failed
            if direct and (
                tenure is None
                or (tenure.state[1] == live.attempt.epoch and time.monotonic() < tenure.state[0])
            ):
                token = context.mark_in_step((name, key, attempt))
                try:
                    value = await step.fn(*args, **kwargs)
                finally:
                    context.unmark_in_step(token)
            elif timeout is None:
                value = await _call(live, step, key, attempt, args, kwargs)
            else:
                async with asyncio.timeout(timeout) as limit:
                    value = await _call(live, step, key, attempt, args, kwargs)
        except Exception as exc:
            if live.attempt.streams is not None:
                await live.attempt.streams.fail(key, attempt)
            timed_out = limit is not None and limit.expired()
            ran_on = None
            if timed_out:
                try:
                    ran_on = await _outlived(live, key)
                except BaseException:
                    if observed is not None:
                        observed.interrupted()
                    raise
            if observed is not None:
                observed.failed(exc, timed_out)
            failure = await _record_failure(
                live,
                key,
                name,
                exc,
                attempt,
                attempt - spared,
                step.retry,
                timeout if timed_out else None,
                started,
                given,
                ran_on,
            )
            if failure is not None:
                raise failure from None
            continue
        except BaseException as exc:
            if live.attempt.streams is not None:
                live.attempt.streams.discard(key, attempt)
            if observed is not None:
                observed.interrupted()
            if isinstance(exc, Cancelled):  # its code stopped for a cancel of the run
                await record_cancelled(live, key, name, attempt, started)
            raise
        if live.attempt.streams is not None:
            # Before the outcome: a completed step's chunks are all stored.
            await live.attempt.streams.finish(key, attempt)
        if observed is not None:
            observed.succeeded()
        return await completed(live, key, step, value, attempt, started, given, transactional)


async def completed(
    live: LiveView,
    key: str,
    step: StepDef[Any, Any],
    value: Any,
    attempt: int,
    started: float,
    given: str,
    transactional: bool = False,
    text: str | None = None,
) -> Any:
    """Commit attempt `attempt` of step `key`, which returned `value`; what the call returns.

    Its streams are finished and its observer told first; `text`: its inner text, if made.
    """
    name, clock = step.name, live.env.clock
    # A transaction step's function returned with its transaction open: the result
    # commits in it, with the function's writes (core/transaction_steps.py).
    held = value if transactional and isinstance(value, transaction_steps.Held) else None
    if held is not None:
        value = held.value
    what = step.result_what
    try:
        try:
            serializer = live.env.serializer
            if text is not None and isinstance(serializer, Offloaded):
                text = await serializer.finish_async(text, value, what=what)
            else:
                text = await blobs.dumps_async(serializer, value, what=what)
        except BlobUnwritable:
            if held is not None:  # not with a transaction open: it holds the locks
                raise
            # A blob store that refuses the result is waited out: a coroutine more
            # only then, not for every step. Through a stop's grace too (its end cuts
            # the wait off), and through a cancel held off by cairn.shield().
            text = await durable.stored(
                live, live.env, value, what=what, given_up=live.interrupts.cutting
            )
    except SerializationError as exc:
        if held is not None:
            await held.transaction.rollback()
        # Raised at the call site, not retried, and recorded: a replay raises it again
        # at the same place instead of meeting the next entry where this one is.
        await record_unserializable(live, key, name, attempt, started, given, exc)
        raise
    except BaseException:
        if held is not None:
            await asyncio.shield(held.transaction.rollback())
        raise
    seq = live.journal.allocate_seq()
    try:
        # Positional: this runs for every step, and keywords cost more to pass.
        record = StepRecord(
            live.run.run_id,
            seq,
            key,
            "step",
            name,
            "completed",
            attempt,
            started,
            clock.now(),
            text,
            None,
            given,
        )
        if held is not None:
            await transaction_steps.commit(live, held, record)
        elif live.attempt.closed or live.marks or live.env.commit_hook is not None:
            await live.commit_step(record)
        else:
            # LiveSteps.commit_step's common path, inlined: every wake-up of the run's
            # task passes each coroutine between it and the write, one fewer here.
            live.journaled = True
            try:
                await live.env.store.write(journal_ops.record_step(live.lease, record))
            except (LeaseLost, StoreError) as first:
                await durable.record_step(live, record, first)
    except StoreRefused as refused:
        # The database will never take this result (too long for it, say): the step
        # fails once, for good, and says why, instead of running again and again.
        raise await record_refused(live, key, name, seq, attempt, started, given, refused) from None
    if type(value) in _SCALARS:
        return value
    # Hand the workflow what a replay will: the stored form. A dataclass that replay
    # cannot import, or a Counter, would otherwise change type when the run recovers.
    if text.startswith(PREFIX):  # offloaded: its blob read back in a thread
        return await live.values.loads_async(text, key)
    return live.env.serializer.loads(text)


async def _outlived(live: LiveView, key: str) -> float | None:
    """Wait until the thread of step `key`'s timed-out sync attempt has returned.

    A thread cannot be stopped: the timeout ended the wait for it, not the code, so the
    next attempt (or the workflow, with StepTimeout) waits here, and attempts of one step
    never overlap. Returns the seconds it ran on after its timeout (None if it had
    already returned). A worker stopping meanwhile cancels this wait; its grace still
    applies before the run is handed back (runtime/executing.py). Code that may never
    return belongs in `isolation="process"`.
    """
    return await sync_steps.outlived(live.attempt.overrunning, key)


async def record_unserializable(
    live: LiveView,
    key: str,
    name: str,
    attempt: int,
    started: float,
    given: str,
    exc: SerializationError,
) -> None:
    """Record step `name` as failed for good: its result cannot be stored."""
    error = {
        "step_name": name,
        "attempts": attempt,
        "error_type": "cairn.errors.SerializationError",
        "message": str(exc),
        "traceback": "",
        "fatal": True,
        "timeout": False,
        "serialization": {"what": exc.what, "type_name": exc.type_name},
    }
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
            finished_at=live.env.clock.now(),
            error=coded.seal(live.env.serializer, json.dumps(error)),
            input=given,
        )
    )


async def record_refused(
    live: LiveView,
    key: str,
    name: str,
    seq: int,
    attempt: int,
    started: float,
    given: str,
    refused: StoreRefused,
) -> StepFailed:
    """Record step `name` as failed for good because its result was refused."""
    message = f"the database refused the result of step {name!r}: {refused}"
    failure = StepFailed(
        step_name=name,
        attempts=attempt,
        error_type="cairn.errors.StoreRefused",
        error_message=message,
        traceback="",
        fatal=True,
    )
    await live.commit_step(
        StepRecord(
            run_id=live.run.run_id,
            seq=seq,
            key=key,
            kind="step",
            name=name,
            status="failed",
            attempts=attempt,
            started_at=started,
            finished_at=live.env.clock.now(),
            error=coded.seal(live.env.serializer, json.dumps(failure.to_dict())),
            input=given,
        )
    )
    return failure


async def _record_failure(
    live: LiveView,
    key: str,
    name: str,
    exc: Exception,
    attempt: int,
    failures: int,
    retry: Retry,
    timeout: float | None,
    started: float,
    given: str,
    ran_on: float | None,
) -> StepFailed | None:
    """Record a failed attempt (begun at `started`), then wait out the backoff or give up.

    `timeout` is set only when this attempt failed by running past it; `ran_on` when its
    thread then ran on for so many seconds.
    """
    failure = describe_failure(exc, name, attempt, timeout, ran_on)
    return await record_failure(live, key, name, failure, attempt, failures, retry, started, given)
