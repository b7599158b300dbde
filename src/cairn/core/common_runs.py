"""The common run in one coroutine: from its claim to its committed end.

Nearly every attempt a worker executes is of an async workflow with no observer, its
arguments a small JSON text and its result one, that returns without a cancel delivered
or columns written. `execute` runs that attempt as `executor.execute` does, in one frame:
the journal's reads, the LiveRun, the workflow's code, the result's text and the run's
end, where the full path passes `executor.execute`, `_attempt`, `_finish` and `_ended`
(the first two are levels every wake-up of the run's task resumes through). Whatever is
not the common case goes to the full path where it is met: before the LiveRun exists,
the whole of `executor.execute`; code that raised or parked, `executor.ended`; a result
that is not the plain case, `executor.returned`; a finish the store failed, the slow path
of `executor._ended`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cairn.authoring import context
from cairn.authoring.context import RunContext
from cairn.blobs.reference import MARK
from cairn.core import blob_reads, executor, failed_attempts
from cairn.core.executor import Outcome
from cairn.core.live_run import LiveRun
from cairn.core.run_env import RunEnv
from cairn.errors import StoreError
from cairn.models import RunStatus
from cairn.observability import logcontext
from cairn.store import waits
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import LeaseLost
from cairn.store.records import RunRecord

_COMPLETED = RunStatus.COMPLETED.value
# Where an ended common run's steps point instead of its LiveRun, which no code runs in.
_ENDED = RunContext()
_LOST = Outcome(None)  # frozen: one for every common run that lost its lease at the end


async def execute(
    env: RunEnv,
    run: RunRecord,
    *,
    fresh: bool,
    on_live: Callable[[LiveRun], None],
    epoch: int = 0,
) -> Outcome:
    """`executor.execute(env, run, ...)`, in this frame alone while the run is common."""
    workflow = env.registry.workflows.get(run.workflow)
    if workflow is None or not workflow.is_async or env.observer is not None:
        return await executor.execute(env, run, fresh=fresh, on_live=on_live, epoch=epoch)
    token = waits.attempt_of(run.run_id, run.fence)
    try:
        if fresh:
            live = LiveRun(env, run, workflow, [], {}, epoch=epoch)
        else:
            records = await env.store.read(journal_ops.load_journal(run.run_id))
            attempts = await env.store.read(journal_ops.load_attempts(run.run_id))
            prior = failed_attempts.by_key(attempts, run.execution)
            live = LiveRun(env, run, workflow, records, prior, epoch=epoch)
        on_live(live)
        steps = live.steps
        entered = context.enter(live)
        facts = logcontext.enter_run(run.run_id, run.workflow, max(run.attempt, 1))
        try:
            # executor._attempt's code, its result made and stored here when plain.
            live.interrupts.at_recorded_point(blob_reads.ARGUMENTS)
            text = run.args
            if steps.dumps_plain is not None and text[:1] == "{" and MARK not in text:
                # Plain JSON (not coded by a key this worker may lack), no blob to read.
                payload = env.serializer.loads(text)
            else:
                payload = await steps.values.loads_async(text, blob_reads.ARGUMENTS)
            args, kwargs = payload.get("args", ()), payload.get("kwargs", {})
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
            dumps = steps.dumps_plain
            if (
                dumps is None
                or live.journal.fatal is not None
                or live.interrupts.delivered_at is not None
                or live.meta_pending
            ):
                return await executor.returned(env, live, value)
            live.journal.check_finished("returned")
            result = dumps(value, what=f"result of workflow {run.workflow!r}")
            if len(result) > steps.surely_inline:  # maybe over a limit: checked there
                return await executor.returned(env, live, value)
            alone = steps.alone()
            try:
                if alone:
                    now = env.clock.now()
                    await env.store.write(
                        run_ops.finish_alone(run.run_id, live.lease, _COMPLETED, result, now)
                    )
                else:
                    await env.store.write(
                        run_ops.finish_run(
                            run.run_id,
                            live.lease,
                            _COMPLETED,
                            result=result,
                            error=None,
                            now=env.clock.now(),
                        )
                    )
            except LeaseLost:
                return _LOST
            except StoreError:
                if not await executor.end_slowly(steps, env, _COMPLETED, result, alone):
                    return _LOST
            return Outcome(_COMPLETED, result)
        except asyncio.CancelledError:
            raise
        except executor.ENDINGS as exc:
            return await executor.ended(env, live, exc)
        finally:
            logcontext.leave_run(facts)
            context.leave(entered)
            live.attempt.close()
            steps.ctx = _ENDED  # the one way back to `live`: no cyclic garbage left
    finally:
        waits.left(token)
