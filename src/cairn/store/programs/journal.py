"""Programs that write a run's journal: steps, failed attempts, messages, hooks, tasks."""

from __future__ import annotations

import json
from collections.abc import Callable

from cairn.models import RunStatus
from cairn.store import _sql, texts
from cairn.store.programs.base import FINISHED, Program, Sql, all_rows, one_row, single_write, wakes
from cairn.store.protocol import LeaseLost
from cairn.store.records import AttemptRecord, Delivery, HookRecord, Lease, StepRecord, TaskRecord


@single_write
def record_step(lease: Lease, step: StepRecord, *, upsert: bool = False) -> Program[None]:
    """Insert (or upsert) a journal entry of a run held by `lease`."""
    text = _sql.UPSERT_STEP_OWNED if upsert else _sql.INSERT_STEP_OWNED
    if not (yield Sql(text, _sql.step_params(step, lease))):
        raise LeaseLost(step.run_id)


def record_attempt(lease: Lease, attempt: AttemptRecord) -> Program[None]:
    """Insert a failed attempt of a step of a run held by `lease`."""
    params = (attempt.failed_at, attempt.run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.TOUCH_OWNED, params)):
        raise LeaseLost(attempt.run_id)
    yield Sql(_sql.INSERT_ATTEMPT, _sql.attempt_params(attempt))


# messages, hooks and tasks


@wakes
def send_message(
    run_id: str, channel: str, payload: str, idempotency_key: str | None, now: float
) -> Program[Delivery | None]:
    """Queue a message and wake the run if a wait of it takes it; None if no such run."""
    row = yield one_row(_sql.SELECT_STATUS, (run_id,))
    if row is None:
        return None
    status, waits_on = str(row[0]), row[1]
    if status in FINISHED:
        return Delivery(status)
    yield Sql(_sql.INSERT_MESSAGE, (run_id, channel, payload, idempotency_key, now))
    woken = bool((yield Sql(_sql.WAKE_WAITING, (now, run_id, channel))))
    waits = None
    if status == RunStatus.WAITING and waits_on is not None:
        waits = tuple(str(c) for c in json.loads(waits_on))
    return Delivery(status, woken, waits)


def consume_message(lease: Lease, channel: str, step: StepRecord) -> Program[str | None]:
    """Take the oldest message on `channel` as the outcome of `step`; None if none."""
    row = yield one_row(_sql.SELECT_OLDEST_MESSAGE, (step.run_id, channel))
    if row is None:
        return None
    message_id, payload = row
    params = _sql.step_params(step)
    params = (*params[:9], payload, *params[10:], step.run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.UPSERT_STEP_OWNED, params)):
        raise LeaseLost(step.run_id)
    yield Sql(_sql.CONSUME_MESSAGE, (step.key, message_id))
    return str(payload)


def consume_messages(
    lease: Lease, channel: str, step: StepRecord, limit: int, combine: Callable[[list[str]], str]
) -> Program[str | None]:
    """Take up to `limit` oldest messages on `channel` as the outcome of `step`; None if none.

    The entry's result is `combine(payloads)` (oldest first), the text returned.
    """
    rows = yield all_rows(_sql.SELECT_OLDEST_MESSAGES, (step.run_id, channel, limit))
    if not rows:
        return None
    result = combine([str(payload) for _, payload in rows])
    params = _sql.step_params(step)
    params = (*params[:9], result, *params[10:], step.run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.UPSERT_STEP_OWNED, params)):
        raise LeaseLost(step.run_id)
    ids = json.dumps([str(message_id) for message_id, _ in rows])
    yield Sql(_sql.CONSUME_MESSAGES, (step.key, step.run_id, channel, ids))
    return result


def create_hook(lease: Lease, step: StepRecord, hook: HookRecord) -> Program[None]:
    """Journal a hook's creation and insert its row."""
    yield from record_step(lease, step, upsert=True)
    yield Sql(_sql.INSERT_HOOK, _sql.hook_params(hook))


@wakes
def resume_hook(token: str, payload: str, now: float) -> Program[str | None]:
    """Use a hook once; the run id, or None if unknown, used, expired or its run finished."""
    row = yield one_row(_sql.SELECT_HOOK_RUN, (token,))
    if row is None:
        return None
    run_id = row[0]
    state = yield one_row(_sql.SELECT_STATUS, (run_id,))
    if state is None or state[0] in FINISHED:
        return None  # nobody will ever wait for it: the caller must not think it delivered
    if not (yield Sql(_sql.USE_HOOK, (now, token, now))):
        return None
    channel = f"hook:{token}"
    yield Sql(_sql.INSERT_MESSAGE, (run_id, channel, payload, None, now))
    yield Sql(_sql.WAKE_WAITING, (now, run_id, channel))
    return str(run_id)


def create_task(lease: Lease, step: StepRecord, task: TaskRecord) -> Program[None]:
    """Journal a human task's creation and insert its row."""
    yield from record_step(lease, step, upsert=True)
    yield Sql(_sql.INSERT_TASK, _sql.task_params(task))


@wakes
def submit_task(
    task_id: str, values: str, by: str | None, now: float
) -> Program[TaskRecord | None]:
    """Submit an open task and queue its values; None if it is not open."""
    if not (yield Sql(_sql.SUBMIT_TASK, (now, texts.stored_or_none(by), values, task_id))):
        return None
    task = _sql.task_from_row((yield one_row(_sql.SELECT_TASK, (task_id,))))
    channel = f"task:{task_id}"
    yield Sql(_sql.INSERT_MESSAGE, (task.run_id, channel, values, None, now))
    yield Sql(_sql.WAKE_WAITING, (now, task.run_id, channel))
    return task
