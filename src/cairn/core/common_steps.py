"""The common step in one coroutine: new work, an async body that returns at once.

Nearly every step a live run calls is new (nothing recorded at its key), has no
interrupt pending, no earlier attempt, no queue, no timeout and no observer, and its
body returns a small value at its first try. `step` runs that case from its key to its
committed row in one frame: the checks, the call, the encoding, the row and the write,
where the full path (core/live_steps.py `LiveSteps.full_step`, then core/attempts.py
`run_new_step`) passes two more coroutines, whose frames every wake-up of the run's task
resumes. Whatever is not the common case is handed to the full path at the point it is
met, with what happened so far: before the body, the whole step; a body that raised,
`run_new_step` with that first attempt (its retries, cancels, failures recorded);
a body that returned, `attempts.completed` (its streams, blobs, marks, hooks).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from cairn.authoring.context import in_run, mark_in_step, unmark_in_step
from cairn.authoring.definitions import StepDef
from cairn.blobs.reference import PREFIX
from cairn.core import attempts, durable, step_input
from cairn.errors import Cancelled, SerializationError, StoreError, StoreRefused
from cairn.serialization.json_text import encode_json
from cairn.store.programs.journal import record_step
from cairn.store.protocol import LeaseLost
from cairn.store.records import StepRecord

if TYPE_CHECKING:
    from cairn.core.live_view import LiveView

_SCALARS = attempts._SCALARS
_SHORT = step_input.MAX_BYTES // 4  # characters: surely within the input kept


async def step(
    live: LiveView,
    key: str,
    step: StepDef[Any, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Run step `key` as `LiveSteps.full_step` does; in this frame alone if it is common."""
    interrupts = live.interrupts
    env = live.env
    tenure = env.tenure
    if not (
        step.is_async
        and step.timeout is None
        and step.queue is None
        and type(step) is StepDef
        and live.journal.fresh(key)
        and not (
            interrupts.cancel
            or interrupts.pause
            or interrupts.handing_back
            or interrupts.delivered_at is not None
        )
        and live.observed is None
        and key not in live.prior_attempts
        and in_run() is live.ctx
        and (
            tenure is None
            or (tenure.state[1] == live.attempt.epoch and time.monotonic() < tenure.state[0])
        )
    ):
        return await live.full_step(key, step, args, kwargs)
    running = live.attempt.running_steps
    running[key] = asyncio.current_task(env.loop)
    try:
        name = step.name
        given = None
        if live.dumps_plain and not kwargs and not live.hook_tokens and step.keep_input:
            # step_input.serialize's text for flat positional scalars, without its frames.
            if _SCALARS.issuperset(map(type, args)):
                try:
                    given = encode_json(list(args))
                except ValueError:  # a NaN: serialize tags it
                    given = None
                if given is not None and not (given.isascii() and len(given) <= _SHORT):
                    given = None
        if given is None:
            given = (
                step_input.serialize(env.serializer, args, kwargs, hidden=live.hook_tokens)
                if step.keep_input
                else step_input.NOT_KEPT
            )
        started = env.clock.now()
        live.flying[key] = (name, 1, started)
        token = mark_in_step((name, key, 1))
        failed: BaseException | None = None
        try:
            value = await step.fn(*args, **kwargs)
        except BaseException as exc:
            failed = exc
        finally:
            unmark_in_step(token)
        if failed is not None:
            tried = (failed, started, given)
            return await attempts.run_new_step(live, key, step, args, kwargs, tried)
        attempt = live.attempt
        dumps = live.dumps_plain
        if (
            dumps is None
            or attempt.streams is not None
            or attempt.closed
            or live.marks
            or env.commit_hook is not None
        ):
            if attempt.streams is not None:
                await attempt.streams.finish(key, 1)  # before the outcome, as run_new_step
            return await attempts.completed(live, key, step, value, 1, started, given)
        try:
            text = dumps(value, what=step.result_what)
        except SerializationError as exc:  # as attempts.completed: recorded, then raised
            await attempts.record_unserializable(live, key, name, 1, started, given, exc)
            raise
        if len(text) > live.surely_inline:  # maybe over a limit: checked or offloaded there
            return await attempts.completed(live, key, step, value, 1, started, given, text=text)
        journal = live.journal
        seq = journal.next_seq  # Journal.allocate_seq, inlined while far from the limits
        if seq > journal.warn_history:
            seq = journal.allocate_seq()
        else:
            journal.next_seq = seq + 1
        record = StepRecord(
            live.run.run_id,
            seq,
            key,
            "step",
            name,
            "completed",
            1,
            started,
            env.clock.now(),
            text,
            None,
            given,
        )
        live.journaled = True
        try:
            try:
                await env.store.write(record_step(live.lease, record))
            except (LeaseLost, StoreError) as lost:
                await durable.record_step(live, record, lost)
        except StoreRefused as refused:
            raise await attempts.record_refused(
                live, key, name, seq, 1, started, given, refused
            ) from None
        if type(value) in _SCALARS:
            return value
        # What a replay will hand the workflow: the stored form (see run_new_step).
        if text.startswith(PREFIX):
            return await live.values.loads_async(text, key)
        return env.serializer.loads(text)
    except Cancelled:
        # check_cancelled() in the step's code: delivered into the workflow here.
        if interrupts.delivered_at is None:
            interrupts.delivered_at = key
        await live.record_cancel()
        raise
    finally:
        running.pop(key, None)
        live.flying.pop(key, None)  # no attempt of it is in flight any more
        if live.attempt.step_waiter is not None:
            live.attempt.step_ended()
