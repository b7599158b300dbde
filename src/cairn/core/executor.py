"""One attempt of a run: replay what is recorded, run what is new, then finish or park."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cairn import blobs, ids
from cairn.authoring import context
from cairn.blobs import BlobUnwritable
from cairn.codecs import coded
from cairn.core import blob_reads, durable, failed_attempts, parkings, streams, versions
from cairn.core.live_run import LiveRun
from cairn.core.live_steps import LiveSteps
from cairn.core.run_env import RunEnv
from cairn.core.run_errors import error_json
from cairn.core.signals import ContinueAsNew, HandBack, KeyMissing, OtherVersion, Suspend, Unwind
from cairn.errors import (
    CairnError,
    Cancelled,
    NonDeterminismError,
    SerializationError,
    StoreError,
    StoreRefused,
)
from cairn.models import RunStatus
from cairn.observability import logcontext, propagation
from cairn.store import waits
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import LeaseLost
from cairn.store.records import Lease, RunRecord

log = logcontext.logger("cairn.executor")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an attempt ended: a final status, a parked status, or abandoned (None)."""

    status: str | None
    result: str | None = None
    error: str | None = None
    lacking: KeyMissing | OtherVersion | None = None  # abandoned for a key or code it lacks
    idle: bool = False  # abandoned having recorded nothing: not an attempt of the run


async def execute(
    env: RunEnv,
    run: RunRecord,
    *,
    fresh: bool,
    on_live: Callable[[LiveRun], None] | None = None,
    epoch: int = 0,
) -> Outcome:
    """Execute one attempt of `run`, which this worker holds, and store how it ended.

    `fresh` says the run was just created here, so it has no journal to load. `on_live`
    gets the attempt's LiveRun as soon as it exists, so operator requests can reach it.
    `epoch` is the worker's tenure epoch when it claimed the run (see core/tenure.py).
    """
    # This context's database work (steps' tasks inherit it) is for this run. One coroutine,
    # not a wrapper around another: every step's wake-up passes each level.
    token = waits.attempt_of(run.run_id, run.fence)
    try:
        if fresh:
            records, prior = [], {}
        else:
            records = await env.store.read(journal_ops.load_journal(run.run_id))
            # Failed attempts of the step being retried: after a recovery, or a backoff parked.
            attempts = await env.store.read(journal_ops.load_attempts(run.run_id))
            prior = failed_attempts.by_key(attempts, run.execution)
        try:
            workflow = env.registry.workflow(run.workflow)
        except CairnError as exc:
            bare = durable.Bare(run, Lease(env.owner, run.fence))
            return await _finish(env, bare, RunStatus.FAILED.value, error=error_json(exc))
        live = LiveRun(env, run, workflow, records, prior, epoch=epoch)
        if on_live is not None:
            on_live(live)
        observer = env.observer
        if observer is None:
            return await _attempt(env, live)
        # The run's very first attempt: its first claim (fence 1). Not its `attempt`, which
        # a hand-back that wrote nothing takes back: that attempt began all the same.
        first = run.fence <= 1
        scope = live.steps.observed = observer.run(run, first)
        try:
            outcome = await _attempt(env, live)
        except BaseException:
            scope.ended(None, None)
            raise
        scope.ended(outcome.status, outcome.error)
        return outcome
    finally:
        waits.left(token)


async def _attempt(env: RunEnv, live: LiveRun) -> Outcome:
    """Run the workflow's code in `live` and store how the attempt ended."""
    run, workflow = live.run, live.workflow
    token = context.enter(live)
    facts = logcontext.enter_run(run.run_id, run.workflow, max(run.attempt, 1))
    try:
        # A cancel delivered while they were read, before the code began, is met there again.
        live.interrupts.at_recorded_point(blob_reads.ARGUMENTS)
        payload = await live.steps.values.loads_async(run.args, blob_reads.ARGUMENTS)
        args, kwargs = tuple(payload.get("args", ())), dict(payload.get("kwargs", {}))
        if workflow.is_async:
            # Runs it scheduled without awaiting are written before the attempt ends:
            # pending_starts.settled, inlined (a wrapper coroutine is one more level for
            # each step's wake-up to pass).
            scheduled = live.attempt.scheduled
            try:
                value = await workflow.fn(*args, **kwargs)
            except asyncio.CancelledError:
                raise
            except BaseException:
                if scheduled:
                    await scheduled.drain()
                raise
            if scheduled:
                await scheduled.drain()
        else:
            ctx = contextvars.copy_context()
            value = await env.loop.run_in_executor(
                env.workflow_threads, lambda: ctx.run(workflow.fn, *args, **kwargs)
            )
        return await returned(env, live, value)
    except asyncio.CancelledError:
        raise
    except ENDINGS as exc:
        return await ended(env, live, exc)
    finally:
        logcontext.leave_run(facts)
        context.leave(token)
        live.attempt.close()


async def returned(env: RunEnv, live: LiveRun, value: Any) -> Outcome:
    """How an attempt whose workflow code returned `value` ends (raises as _attempt's code)."""
    run = live.run
    _raise_divergence(live)
    live.journal.check_finished("returned")
    if live.interrupts.delivered_at is not None:
        await live.steps.record_cancel()  # delivered by check_cancelled() and swallowed
    await live.flush_meta()
    what = f"result of workflow {run.workflow!r}"
    try:
        text = await blobs.dumps_async(env.serializer, value, what=what)
    except BlobUnwritable:  # waited out: a coroutine more only then, as for a step
        text = await durable.stored(live.steps, env, value, what, live.interrupts.asked)
    # A workflow that caught its cancellation and returned still ends CANCELLED.
    status = _CANCELLED if live.interrupts.delivered else _COMPLETED
    return await _finish(env, live.steps, status, result=text, alone=live.steps.alone())


async def ended(env: RunEnv, live: LiveRun, exc: BaseException) -> Outcome:
    """How an attempt whose code (or its end) raised `exc` ends: parked, failed, ..."""
    run, workflow = live.run, live.workflow
    try:
        raise exc
    except Suspend as parked:
        if live.journal.fatal is not None:
            return await _finish(
                env, live.steps, RunStatus.FAILED.value, error=error_json(live.journal.fatal)
            )
        await live.attempt.settle()
        await live.steps.store_marks()
        await live.steps.record_cancel()
        await live.flush_meta()
        parking = parkings.parking(live, parked)
        futile = 0
        # A pause is no wake-up.
        if env.futile is not None and parking.status != RunStatus.PAUSED.value:
            progressed = live.steps.progressed()
            futile = env.futile.note(run.run_id, progressed=progressed, now=env.clock.now())
        if live.steps.observed is not None:
            live.steps.observed.parked(parking.status, parking.wake_at, parking.waiting_for)
            if futile:
                live.steps.observed.futile(futile)
        return await _park(env, live, parking, futile)
    except ContinueAsNew as again:
        if live.journal.fatal is not None:
            return await _finish(
                env, live.steps, RunStatus.FAILED.value, error=error_json(live.journal.fatal)
            )
        await live.steps.record_cancel()
        await live.flush_meta()
        if live.interrupts.cancel:
            return await _end_chain(env, live)
        return await _continue(env, live, again, workflow.version)
    except HandBack as leaving:
        # Its worker is stopping, or lacks a key or the run's version of the code (KeyMissing,
        # OtherVersion: failed if no live worker runs it): steps still executing in other
        # branches commit first (they are not run again), then it hands the run back.
        await live.attempt.settle()
        if isinstance(leaving, OtherVersion) and (
            no := await versions.unserved(env, run.run_id, leaving)
        ):
            return await _finish(env, live.steps, _FAILED, error=error_json(no))
        await live.flush_meta()
        if isinstance(leaving, KeyMissing | OtherVersion):
            return Outcome(None, lacking=leaving, idle=not live.steps.progressed())
        return Outcome(None)
    except Unwind:
        return Outcome(None)
    except Cancelled as exc:
        if live.journal.fatal is not None:
            return await _finish(
                env, live.steps, RunStatus.FAILED.value, error=error_json(live.journal.fatal)
            )
        await live.steps.record_cancel()
        await live.flush_meta()
        error = error_json(exc, at=live.interrupts.delivered_at)
        return await _finish(env, live.steps, RunStatus.CANCELLED.value, error=error)
    except NonDeterminismError as exc:
        log.error("run %s: %s", run.run_id, exc)
        return await _finish(env, live.steps, RunStatus.FAILED.value, error=error_json(exc))
    except StoreRefused as exc:
        # A write of the run's own the database will never take: the run fails, once.
        log.error("run %s: %s", run.run_id, exc)
        return await _finish(env, live.steps, RunStatus.FAILED.value, error=error_json(exc))
    except StoreError as exc:
        # The database failed, not the workflow: its worker hands the run back.
        log.warning("run %s: attempt abandoned, the store failed: %s", run.run_id, exc)
        return Outcome(None)
    except Exception as exc:
        failure = live.journal.fatal or exc
        return await _finish(env, live.steps, RunStatus.FAILED.value, error=error_json(failure))


def _raise_divergence(live: LiveRun) -> None:
    # Workflow code may have caught the NonDeterminismError; the run fails all the same.
    if live.journal.fatal is not None:
        raise live.journal.fatal


async def _ended(live: durable.Attempt, write: Any, *, what: Callable[[], str]) -> bool:
    """Make the write that ends an attempt; False if the attempt lost its run meanwhile."""
    try:
        await write()
        return True
    except LeaseLost:
        return False
    except StoreError:
        pass  # the slow path below decides what it meant, and sends it again if need be
    return await _sent_slowly(live, write, what)


async def end_slowly(live: LiveSteps, env: RunEnv, status: str, result: str, alone: bool) -> bool:
    """`_finish`'s slow path for a run ending `status` whose first finish the store failed."""
    finish = _finish_write(env, live, status, result, None, alone)
    return await _sent_slowly(live, finish, _finish_what(live.run, status))


async def _sent_slowly(live: durable.Attempt, write: Any, what: Callable[[], str]) -> bool:
    try:
        await durable.write(live, write, what=what())  # named only on this slow path
    except Unwind:
        return False
    return True


_CANCELLED, _COMPLETED = RunStatus.CANCELLED.value, RunStatus.COMPLETED.value  # read once
_FAILED = RunStatus.FAILED.value
_VOIDING = (_CANCELLED, RunStatus.FAILED.value)
# What ends an attempt by unwinding its code: `ended` tells them apart (not CancelledError).
ENDINGS = (Exception, Suspend, ContinueAsNew, HandBack, Unwind, Cancelled)


async def _finish(
    env: RunEnv,
    live: durable.Attempt,
    status: str,
    *,
    result: str | None = None,
    error: str | None = None,
    alone: bool = False,
) -> Outcome:
    stored_error = None if error is None else coded.seal(env.serializer, error)
    finish = _finish_write(env, live, status, result, stored_error, alone)
    what = _finish_what(live.run, status)
    if status in _VOIDING and isinstance(live, LiveSteps):
        async with streams.unfinished_voided(env, live):  # the dead steps' resets go first
            ended = await _ended(live, finish, what=what)
    else:  # no context manager to enter: a run's end is on every run's path
        ended = await _ended(live, finish, what=what)
    return Outcome(status, result, error) if ended else Outcome(None)


def _finish_write(
    env: RunEnv,
    live: durable.Attempt,
    status: str,
    result: str | None,
    error: str | None,
    alone: bool,
) -> Callable[[], Any]:
    """The write that ends `live`'s run `status` (sent again by the slow path if need be)."""
    return lambda: env.store.write(
        run_ops.finish_run(
            live.run.run_id,
            live.lease,
            status,
            result=result,
            error=error,
            now=env.clock.now(),
            alone=alone,
        )
    )


def _finish_what(run: RunRecord, status: str) -> Callable[[], str]:
    return lambda: f"the end of run {run.run_id!r} ({status})"


async def _continue(
    env: RunEnv, live: LiveRun, again: ContinueAsNew, version: str | None
) -> Outcome:
    run = live.run
    try:
        value = {"args": list(again.args_), "kwargs": again.kwargs}
        what = f"arguments of workflow {run.workflow!r}"
        args = await durable.value_text(live.steps, env, value, what, live.interrupts.asked)
    except SerializationError as exc:
        return await _finish(env, live.steps, RunStatus.FAILED.value, error=error_json(exc))
    except Unwind:  # its worker stopped while the blob store would not take them: handed back
        return Outcome(None)
    now = env.clock.now()
    successor = RunRecord(
        run_id=ids.new_run_id(),
        workflow=run.workflow,
        status=RunStatus.PENDING.value,
        args=args,
        created_at=now,
        updated_at=now,
        max_recoveries=run.max_recoveries,
        parent_id=run.parent_id,
        queue=run.queue,
        priority=run.priority,
        partition_key=run.partition_key,
        continued_from=run.run_id,
        detached=run.detached,
        version=version,  # the successor runs the code of now, not the code it started with
        trace_context=propagation.current() or run.trace_context,
        origin="continue",
    )

    went_on: list[bool] = []

    async def go_on() -> None:
        write = run_ops.continue_run(run.run_id, live.lease, successor, now)
        went_on.append(await env.store.write(write))

    if not await _ended(live.steps, go_on, what=lambda: f"run {run.run_id!r} continuing as new"):
        return Outcome(None)
    if not went_on[-1]:  # a cancel stored since the run's last look: it did not go on
        live.interrupts.request("cancel")
        return await _end_chain(env, live)
    return Outcome(RunStatus.CONTINUED.value, successor.run_id)


async def _end_chain(env: RunEnv, live: LiveRun) -> Outcome:
    """A cancelled run never starts a successor: the chain ends here, CANCELLED."""
    cancelled = Cancelled(live.interrupts.reason)
    error = error_json(cancelled, at=live.interrupts.delivered_at)
    return await _finish(env, live.steps, RunStatus.CANCELLED.value, error=error)


async def _park(env: RunEnv, live: LiveRun, parking: parkings.Parking, futile: int) -> Outcome:
    run = live.run

    def park() -> Any:
        return env.store.write(
            run_ops.park_run(
                run.run_id,
                live.lease,
                parking.status,
                wake_at=parking.wake_at,
                waiting_for=parking.waiting_for,
                now=env.clock.now(),
                waits_on=parking.waits_on,
                futile_wakes=futile,
            )
        )

    what = lambda: f"run {run.run_id!r} parking ({parking.status})"  # noqa: E731
    ended = await _ended(live.steps, park, what=what)
    return Outcome(parking.status) if ended else Outcome(None)
