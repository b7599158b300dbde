"""What a step-queue worker stores and reads: an attempt's result, report and input.

As where the run executes (core/durable.py `stored`, `fetched`), a blob store that
cannot take a value, or give one back, for a while (full, unwritable, out of reach) is
not the step's fault: failing the attempt for it would run the step again, or fail it
for good. The worker tries the blob again, backing off, while it holds the claim
(runtime/step_worker.py renews it meanwhile; a lost claim, an ended run or the worker's
stop cancels the wait), and the parked run's `waiting_for` names the store's failure
instead of its step queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cairn import blobs
from cairn.blobs import BlobStoreUnavailable, BlobUnwritable, reference
from cairn.core import durable, remote_steps
from cairn.core.run_env import RunEnv
from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.store.programs import runs as run_ops
from cairn.store.records import StepTaskRecord

log = logcontext.logger("cairn.step_worker")
T = TypeVar("T")


async def dumps(env: RunEnv, task: StepTaskRecord, value: Any, what: str) -> str:
    """`value`'s stored text; a blob store that refuses it is waited out (`stored`)."""
    try:
        return await blobs.dumps_async(env.serializer, value, what=what)
    except BlobUnwritable as refused:  # a coroutine more only then
        return await stored(env, task, value, what, refused)


async def stored(
    env: RunEnv, task: StepTaskRecord, value: Any, what: str, refused: BlobUnwritable
) -> str:
    """`value`'s stored text, once the blob store that `refused` it takes it."""
    log.warning(
        "run %s: %s; retrying until the blob store takes it",
        task.run_id,
        str(refused).replace("\n", " "),
    )
    again = functools.partial(blobs.dumps_async, env.serializer, value, what=what)
    return await _retried(env, task, refused.waiting_for(), again, BlobUnwritable)


async def loads(env: RunEnv, task: StepTaskRecord, text: str) -> Any:
    """The value stored as `text` (the step's input); a blob store away is waited out."""
    try:
        return await blobs.loads_async(env.serializer, text)
    except BlobStoreUnavailable as away:  # a coroutine more only then
        log.warning("run %s: %s; retrying until the blob store answers", task.run_id, away)
        again = functools.partial(blobs.loads_async, env.serializer, text)
        note = reference.reading_note(away)
        return await _retried(env, task, note, again, BlobStoreUnavailable)


async def _retried(
    env: RunEnv,
    task: StepTaskRecord,
    note: str,
    again: Callable[[], Awaitable[T]],
    failure: type[Exception],
) -> T:
    """`again()` until it does not raise `failure`, the parked run's `waiting_for` `note`."""
    parked = f"{remote_steps.WAITING}:{task.step}@{task.queue}"
    noted = False
    delay = durable.FIRST_DELAY
    try:
        while True:
            # Until it is said: the worker may have claimed the attempt before the run
            # parked on it (its `waiting_for` is set then).
            noted = noted or await _note(env, task.run_id, note, parked)
            await asyncio.sleep(delay)
            delay = min(delay * 2, durable.LAST_DELAY)
            with contextlib.suppress(failure):
                return await again()
    finally:
        if noted:  # what it waits for is its step queue again (also when stopped)
            await asyncio.shield(_note(env, task.run_id, parked, note))


async def _note(env: RunEnv, run_id: str, note: str, instead_of: str) -> bool:
    """Say `note` for what the parked run waits for; False if not (or no database)."""
    try:
        return await env.store.write(run_ops.note_parked(run_id, note, instead_of))
    except StoreError as exc:
        log.info("run %s: cannot say it waits for the blob store: %s", run_id, exc)
        return False
