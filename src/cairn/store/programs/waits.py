"""Programs of what waiting runs consume: messages, hooks and human tasks.

A message is queued on a run's channel and wakes the run if one of its waits takes it;
a hook and a human task are journaled by their run, then resumed (submitted) from
outside with a message on their own channel.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from cairn.models import RunStatus
from cairn.store import _sql, texts
from cairn.store.programs.base import FINISHED, Program, Sql, all_rows, one_row, operation, wakes
from cairn.store.programs.journal import upsert_step
from cairn.store.protocol import LeaseLost
from cairn.store.records import Delivery, HookRecord, Lease, StepRecord, TaskRecord

# messages


@operation
@wakes
def send_message(
    run_id: str,
    channel: str,
    payload: str,
    *,
    idempotency_key: str | None,
    now: float,
    unless_sealed: str | tuple[str, ...] | None = None,
) -> Program[Delivery | None]:
    """Queue `payload` on the run's `channel`; wake the run if one of its waits takes it.

    A WAITING run whose waits take the channel (see park_run's `waits_on`) is made due
    now. Returns the run's status, whether it was woken and what its waits consume; None
    when no run has that id. A finished run gets no message (its status is returned,
    `repeated` when it had this key's message already: a sender retrying a send that
    finished the run). A repeated (run, channel, idempotency_key) is stored once, and
    answered `repeated` without waking the run: it brings nothing new to take. With
    `unless_sealed` (the prefixes of encrypted and offloaded texts, from a sender that
    cannot encrypt), a run whose arguments start with one gets nothing: `sealed` holds
    their head.
    """
    row = yield one_row(_sql.SELECT_STATUS, (run_id,))
    if row is None:
        return None
    status, waits_on = str(row[0]), row[1]
    if unless_sealed is not None and str(row[2] or "").startswith(unless_sealed):
        return Delivery(status, sealed=str(row[2]))
    if status in FINISHED:
        repeated = idempotency_key is not None and (
            (yield one_row(_sql.SELECT_MESSAGE_KEY, (run_id, channel, idempotency_key))) is not None
        )
        return Delivery(status, repeated=repeated)
    stored = yield Sql(_sql.INSERT_MESSAGE, (run_id, channel, payload, idempotency_key, now))
    if not stored:  # its idempotency_key is kept already: nothing new, so nothing to wake
        return Delivery(status, repeated=True)
    woken = bool((yield Sql(_sql.WAKE_WAITING, (now, run_id, channel))))
    waits = None
    if status == RunStatus.WAITING and waits_on is not None:
        waits = tuple(str(c) for c in json.loads(waits_on))
    return Delivery(status, woken, waits)


@operation
def consume_message(lease: Lease, channel: str, step: StepRecord) -> Program[str | None]:
    """Atomically take the oldest unconsumed message on `channel` of `step.run_id`.

    `step` is upserted with the payload as its result. Returns None (nothing written)
    if none is queued; raises LeaseLost if not held.
    """
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


@operation
def consume_messages(
    lease: Lease,
    channel: str,
    step: StepRecord,
    *,
    limit: int,
    combine: Callable[[list[str]], str],
) -> Program[str | None]:
    """Atomically take the `limit` oldest unconsumed messages on `channel` of the run.

    `step` is upserted with `combine(payloads)` (oldest first) as its result, and that
    text is returned. Returns None (nothing written) if none is queued; raises LeaseLost
    if not held.
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


# hooks


@operation
def create_hook(lease: Lease, step: StepRecord, hook: HookRecord) -> Program[None]:
    """Upsert the hook's journal entry and insert its row, in one transaction.

    A row with the same token already there is kept as it is (a replayed creation).
    Raises LeaseLost if not held.
    """
    yield from upsert_step(lease, step)
    yield Sql(_sql.INSERT_HOOK, _sql.hook_params(hook))


@operation
def get_hook(token: str) -> Program[HookRecord | None]:
    """Read: the hook stored under `token` (the digest), used or not; None if none."""
    rows = yield all_rows(_sql.SELECT_HOOK, (token,))
    return _sql.hook_from_row(rows[0]) if rows else None


@operation
def list_hooks(
    *, now: float, run_id: str | None = None, limit: int = 100
) -> Program[list[HookRecord]]:
    """Read: hooks that can still be called at `now`, oldest first, at most `limit`.

    That is: unused, not expired, and their run not finished; only `run_id`'s if given.
    Their `token` is the stored digest, which resumes nothing.
    """
    rows = yield all_rows(_sql.SELECT_OPEN_HOOKS, (now, run_id, run_id, limit))
    return [_sql.hook_from_row(row) for row in rows]


@operation
@wakes
def resume_hook(token: str, payload: str, *, now: float) -> Program[str | None]:
    """Mark the hook used and queue `payload` on channel `hook:TOKEN` of its run.

    Returns the run id; None (nothing written) if the token is unknown, used or expired,
    or its run has finished.
    """
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


# human tasks


@operation
def create_task(lease: Lease, step: StepRecord, task: TaskRecord) -> Program[None]:
    """Upsert the task's journal entry and insert its row, in one transaction."""
    yield from upsert_step(lease, step)
    yield Sql(_sql.INSERT_TASK, _sql.task_params(task))


@operation
def get_task(task_id: str) -> Program[TaskRecord | None]:
    """Read: the task, or None."""
    rows = yield all_rows(_sql.SELECT_TASK, (task_id,))
    return _sql.task_from_row(rows[0]) if rows else None


@operation
def list_tasks(
    *,
    status: str | None,
    assignee: str | None,
    run_id: str | None = None,
    descendants: bool = False,
) -> Program[list[TaskRecord]]:
    """Read: tasks matching every given filter, oldest first.

    With `descendants`, `run_id` keeps the tasks of that run and of the runs below it
    (its children, theirs, ... at most `_sql.TREE_DEPTH` generations down).
    """
    text, params = _sql.list_tasks(status, assignee, run_id, descendants)
    rows = yield all_rows(text, params)
    return [_sql.task_from_row(row) for row in rows]


@operation
@wakes
def submit_task(
    task_id: str, values: str, *, by: str | None, now: float
) -> Program[TaskRecord | None]:
    """Mark an open task submitted (by, when, values) and queue the values for its run.

    The values go on channel `task:ID`. Returns None (nothing written) if not open.
    """
    if not (yield Sql(_sql.SUBMIT_TASK, (now, texts.stored_or_none(by), values, task_id))):
        return None
    task = _sql.task_from_row((yield one_row(_sql.SELECT_TASK, (task_id,))))
    channel = f"task:{task_id}"
    yield Sql(_sql.INSERT_MESSAGE, (task.run_id, channel, values, None, now))
    yield Sql(_sql.WAKE_WAITING, (now, task.run_id, channel))
    return task


@operation
def close_tasks(run_id: str, status: str, task_id: str | None = None) -> Program[None]:
    """Give the run's open tasks (or only `task_id`) a final `status`."""
    yield all_rows(_sql.CLOSE_TASKS, (status, run_id, task_id, task_id))
