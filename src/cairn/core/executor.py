"""One attempt of a run: replay what is recorded, run what is new, then finish or park."""

from __future__ import annotations

import contextvars
import json
import logging
import traceback
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from cairn.authoring import context
from cairn.core.attempts import type_name
from cairn.core.live_run import LiveRun, RunEnv
from cairn.core.signals import Suspend, Unwind
from cairn.errors import CairnError, Cancelled, NonDeterminismError, StepFailed
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


async def execute(env: RunEnv, run: RunRecord, *, fresh: bool) -> Outcome:
    """Execute one attempt of `run`, which this worker owns, and store how it ended.

    `fresh` says the run was just created here, so it has no journal to load.
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
        live.journal.check_finished("returned")
        await live.flush_meta()
        text = env.serializer.dumps(value, what=f"result of workflow {run.workflow!r}")
        return await _finish(env, run, "COMPLETED", result=text)
    except Suspend as parked:
        return await _park(env, run, parked)
    except Unwind:
        return Outcome(None)
    except Cancelled as exc:
        return await _finish(env, run, "CANCELLED", error=error_json(exc))
    except NonDeterminismError as exc:
        log.error("run %s: %s", run.run_id, exc)
        return await _finish(env, run, "FAILED", error=error_json(exc))
    except Exception as exc:
        return await _finish(env, run, "FAILED", error=error_json(exc))
    finally:
        context.leave(token)


def _group(attempts: list[AttemptRecord]) -> dict[str, list[AttemptRecord]]:
    grouped: dict[str, list[AttemptRecord]] = defaultdict(list)
    for attempt in attempts:
        grouped[attempt.key].append(attempt)
    return dict(grouped)


async def _finish(
    env: RunEnv, run: RunRecord, status: str, *, result: str | None = None, error: str | None = None
) -> Outcome:
    try:
        await env.store.finish_run(
            run.run_id, env.owner, status, result=result, error=error, now=env.clock.now()
        )
    except LeaseLost:
        return Outcome(None)
    return Outcome(status, result, error)


async def _park(env: RunEnv, run: RunRecord, parked: Suspend) -> Outcome:
    try:
        await env.store.park_run(
            run.run_id,
            env.owner,
            parked.status,
            wake_at=parked.wake_at,
            waiting_for=parked.waiting_for,
            now=env.clock.now(),
        )
    except LeaseLost:
        return Outcome(None)
    return Outcome(parked.status)
