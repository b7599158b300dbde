"""One attempt of a run: replay what is recorded, run what is new, then finish or park."""

from __future__ import annotations

import contextvars
import json
import logging
import traceback
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cairn import ids
from cairn.authoring import context
from cairn.core.attempts import type_name
from cairn.core.live_run import LiveRun, RunEnv
from cairn.core.signals import ContinueAsNew, Suspend, Unwind
from cairn.errors import (
    CairnError,
    Cancelled,
    NonDeterminismError,
    SerializationError,
    StepFailed,
    StoreError,
)
from cairn.store.protocol import LeaseLost
from cairn.store.records import AttemptRecord, RunRecord

log = logging.getLogger("cairn.executor")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an attempt ended: a final status, a parked status, or abandoned (None)."""

    status: str | None
    result: str | None = None
    error: str | None = None


def error_json(exc: BaseException, *, step: str | None = None) -> str:
    """The stored form of a run's error."""
    if isinstance(exc, StepFailed):
        data: dict[str, Any] = {
            "type": type_name(exc),
            "message": str(exc),
            "traceback": exc.traceback,
            "step": exc.step_name,
            "cause_type": exc.error_type,
        }
    else:
        data = {
            "type": type_name(exc),
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        }
        if step is not None:
            data["step"] = step
    return json.dumps(data)


def decode_args(env: RunEnv, run: RunRecord) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The positional and keyword arguments a run was started with."""
    payload = env.serializer.loads(run.args)
    return tuple(payload.get("args", ())), dict(payload.get("kwargs", {}))


async def execute(
    env: RunEnv, run: RunRecord, *, fresh: bool, live_runs: dict[str, LiveRun] | None = None
) -> Outcome:
    """Execute one attempt of `run`, which this worker owns, and store how it ended.

    `fresh` says the run was just created here, so it has no journal to load. The LiveRun
    is kept in `live_runs` while it executes, so operator requests can reach it.
    """
    try:
        workflow = env.registry.workflow(run.workflow)
    except CairnError as exc:
        return await _finish(env, run, "FAILED", error=error_json(exc))
    if fresh:
        records, prior = [], {}
    else:
        records = await env.store.load_journal(run.run_id)
        prior = _group(await env.store.load_attempts(run.run_id)) if run.attempt > 1 else {}
    live = LiveRun(env, run, workflow, records, prior)
    if live_runs is not None:
        live_runs[run.run_id] = live
    token = context.enter(live)
    try:
        args, kwargs = decode_args(env, run)
        if workflow.is_async:
            value = await workflow.fn(*args, **kwargs)
        else:
            ctx = contextvars.copy_context()
            value = await env.loop.run_in_executor(
                env.workflow_threads, lambda: ctx.run(workflow.fn, *args, **kwargs)
            )
        _raise_divergence(live)
        live.journal.check_finished("returned")
        await live.flush_meta()
        text = env.serializer.dumps(value, what=f"result of workflow {run.workflow!r}")
        # A workflow that caught its cancellation and returned still ends CANCELLED.
        status = "CANCELLED" if live.interrupts.delivered else "COMPLETED"
        return await _finish(env, run, status, result=text, live=live)
    except Suspend as parked:
        if live.journal.divergence is not None:
            return await _finish(env, run, "FAILED", error=error_json(live.journal.divergence))
        await live.settle()
        await live.flush_meta()
        return await _park(env, run, parked, live.park_time(parked.wake_at))
    except ContinueAsNew as again:
        if live.journal.divergence is not None:
            return await _finish(env, run, "FAILED", error=error_json(live.journal.divergence))
        await live.flush_meta()
        return await _continue(env, run, again)
    except Unwind:
        return Outcome(None)
    except Cancelled as exc:
        if live.journal.divergence is not None:
            return await _finish(env, run, "FAILED", error=error_json(live.journal.divergence))
        await live.flush_meta()
        return await _finish(env, run, "CANCELLED", error=error_json(exc))
    except NonDeterminismError as exc:
        log.error("run %s: %s", run.run_id, exc)
        return await _finish(env, run, "FAILED", error=error_json(exc))
    except StoreError as exc:
        # The database failed, not the workflow: leave the run to be recovered.
        log.warning("run %s: attempt abandoned, the store failed: %s", run.run_id, exc)
        return Outcome(None)
    except Exception as exc:
        failure = live.journal.divergence or exc
        return await _finish(env, run, "FAILED", error=error_json(failure))
    finally:
        context.leave(token)
        live.close()
        if live_runs is not None:
            live_runs.pop(run.run_id, None)


def _raise_divergence(live: LiveRun) -> None:
    # Workflow code may have caught the NonDeterminismError; the run fails all the same.
    if live.journal.divergence is not None:
        raise live.journal.divergence


def _group(attempts: list[AttemptRecord]) -> dict[str, list[AttemptRecord]]:
    grouped: dict[str, list[AttemptRecord]] = defaultdict(list)
    for attempt in attempts:
        grouped[attempt.key].append(attempt)
    return dict(grouped)


async def _finish(
    env: RunEnv,
    run: RunRecord,
    status: str,
    *,
    result: str | None = None,
    error: str | None = None,
    live: LiveRun | None = None,
) -> Outcome:
    try:
        await env.store.finish_run(
            run.run_id,
            env.owner,
            status,
            result=result,
            error=error,
            now=env.clock.now(),
            alone=live is not None and live.alone(),
        )
    except LeaseLost:
        return Outcome(None)
    return Outcome(status, result, error)


async def _continue(env: RunEnv, run: RunRecord, again: ContinueAsNew) -> Outcome:
    try:
        args = env.serializer.dumps(
            {"args": list(again.args_), "kwargs": again.kwargs},
            what=f"arguments of workflow {run.workflow!r}",
        )
    except SerializationError as exc:
        return await _finish(env, run, "FAILED", error=error_json(exc))
    now = env.clock.now()
    successor = RunRecord(
        run_id=ids.new_run_id(),
        workflow=run.workflow,
        status="PENDING",
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
    )
    try:
        await env.store.continue_run(run.run_id, env.owner, successor, now)
    except LeaseLost:
        return Outcome(None)
    return Outcome("CONTINUED", successor.run_id)


async def _park(env: RunEnv, run: RunRecord, parked: Suspend, wake_at: float | None) -> Outcome:
    try:
        await env.store.park_run(
            run.run_id,
            env.owner,
            parked.status,
            wake_at=wake_at,
            waiting_for=parked.waiting_for,
            now=env.clock.now(),
        )
    except LeaseLost:
        return Outcome(None)
    return Outcome(parked.status)
