"""Transaction bodies shared by every SQL backend, written once as "programs".

A program is a generator that yields `Sql` statements and receives each one's result (a
row count, one row, or all rows); its return value is the transaction's result. Backends
only run programs (`SqliteStore` synchronously, `PostgresStore` with await), so the logic
of claiming, fencing, waking and control lives in programs and nowhere else: runs, the
journal, messages, hooks, tasks and operator control here; workers, claims and queue
limits in `claim_programs`; schedules and event triggers in `schedule_programs`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import Any, Literal, TypeVar

from cairn.errors import DuplicateRun
from cairn.store import _sql
from cairn.store.protocol import LeaseLost
from cairn.store.records import (
    AttemptRecord,
    Delivery,
    HookRecord,
    Lease,
    Lineage,
    RetriedStep,
    RunRecord,
    StepRecord,
    TaskRecord,
)

T = TypeVar("T")


# Not frozen, like StepRecord: frozen fields cost an object.__setattr__ each per statement.
@dataclass(slots=True)
class Sql:
    """One statement of a program.

    `fetch` says what the program gets back: the row count, the first row (or None), or
    all rows. `lock` marks a SELECT whose rows the transaction claims: PostgreSQL adds
    `FOR UPDATE SKIP LOCKED` ("skip") or `FOR UPDATE` ("update", waiting for the lock);
    SQLite needs nothing (its write transaction is exclusive).
    """

    text: str
    params: Sequence[Any] = ()
    fetch: Literal["count", "one", "all"] = "count"
    lock: Literal["", "skip", "update"] = ""


Program = Generator[Sql, Any, T]
F = TypeVar("F", bound=Callable[..., Program[Any]])

FINISHED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "CONTINUED"})

_SINGLE_WRITE: set[CodeType] = set()


def single_write(fn: F) -> F:
    """Declare that `fn`'s programs change rows only with their last statement.

    Such a program raises nothing once it has changed a row, so when it fails it has
    changed nothing (SQLite undoes a failing statement by itself), and a backend need not
    guard it with a savepoint. SqliteStore checks the promise: a program that breaks it
    rolls its whole batch back rather than leave part of its work behind.
    """
    _SINGLE_WRITE.add(fn.__code__)
    return fn


def is_single_write(program: Program[Any]) -> bool:
    """True if `program` comes from a function declared `@single_write`."""
    return getattr(program, "gi_code", None) in _SINGLE_WRITE


def one_row(text: str, params: Sequence[Any] = ()) -> Sql:
    """A statement whose first row (or None) the program gets back."""
    return Sql(text, params, "one")


def all_rows(text: str, params: Sequence[Any] = (), *, lock: bool = False) -> Sql:
    """A statement whose rows the program gets back; `lock`: rows it claims (SKIP LOCKED)."""
    return Sql(text, params, "all", "skip" if lock else "")


# runs


@single_write
def create_run(run: RunRecord) -> Program[RunRecord | None]:
    """Insert `run` unless its id exists; returns the existing run, or None if inserted.

    Raises DuplicateRun (before writing) if an active run of the queue holds its dedup key.
    """
    if run.dedup_key is None:
        # The common case in one statement: insert unless the id exists.
        if (yield Sql(_sql.INSERT_RUN, _sql.run_params(run))):
            return None
        return _sql.run_from_row((yield one_row(_sql.SELECT_RUN, (run.run_id,))))
    row = yield one_row(_sql.SELECT_RUN, (run.run_id,))
    if row is not None:
        return _sql.run_from_row(row)
    if run.dedup_key is not None:
        holder = yield one_row(_sql.SELECT_ACTIVE_DEDUP, (run.queue or "", run.dedup_key))
        if holder is not None:
            where = f" in queue {run.queue!r}" if run.queue else ""
            raise DuplicateRun(
                f"dedup key {run.dedup_key!r}{where} is held by active run {holder[0]!r}",
                run_id=str(holder[0]),
                dedup_key=run.dedup_key,
            )
    if (yield Sql(_sql.INSERT_RUN, _sql.run_params(run))):
        return None
    row = yield one_row(_sql.SELECT_RUN, (run.run_id,))
    return _sql.run_from_row(row)


def get_run(run_id: str) -> Program[RunRecord | None]:
    """The run, or None."""
    row = yield one_row(_sql.SELECT_RUN, (run_id,))
    return None if row is None else _sql.run_from_row(row)


def finish_run(
    run_id: str,
    lease: Lease,
    status: str,
    result: str | None,
    error: str | None,
    now: float,
    alone: bool = False,
) -> Program[None]:
    """End a run held by `lease`, then tell its parent and cancel its children.

    `alone` (the caller knows the run has no parent, children or tasks) skips that part.
    """
    params = (status, result, error, now, now, run_id, lease.owner, lease.fence)
    if alone:
        return _finish_owned(run_id, params)
    return _finish_and_tell(run_id, params, status, result, error, now)


@single_write
def _finish_owned(run_id: str, params: tuple[Any, ...]) -> Program[None]:
    if not (yield Sql(_sql.FINISH_RUN, params)):
        raise LeaseLost(run_id)


def _finish_and_tell(
    run_id: str,
    params: tuple[Any, ...],
    status: str,
    result: str | None,
    error: str | None,
    now: float,
) -> Program[None]:
    yield from _finish_owned(run_id, params)
    yield from after_finish(run_id, status, result, error, now)


def after_finish(
    run_id: str, status: str, result: str | None, error: str | None, now: float
) -> Program[None]:
    """What a run's end does to others: its parent is told, its children and tasks end."""
    row = yield one_row(_sql.SELECT_PARENT, (run_id,))
    if row is not None and row[0] is not None:
        message = _sql.child_message(run_id, status, result, error)
        channel = f"child:{run_id}"
        yield Sql(_sql.INSERT_MESSAGE, (row[0], channel, message, None, now))
        yield Sql(_sql.WAKE_WAITING, (now, row[0], channel))
    yield Sql(_sql.CANCEL_CHILDREN, (now, now, run_id))
    # Nobody will wait for the run's open tasks any more: withdraw them from the inbox.
    yield Sql(_sql.CLOSE_TASKS, ("cancelled", run_id, None, None))


def continue_run(run_id: str, lease: Lease, new_run: RunRecord, now: float) -> Program[None]:
    """End a run CONTINUED and create its successor, which takes its untaken events."""
    params = (new_run.run_id, now, now, run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.CONTINUE_RUN, params)):
        raise LeaseLost(run_id)
    yield Sql(_sql.INSERT_RUN, _sql.run_params(new_run))
    yield Sql(_sql.PASS_ON_EVENTS, (new_run.run_id, run_id))
    # A parent waiting on this run learns the successor's id (in `result`).
    yield from after_finish(run_id, "CONTINUED", new_run.run_id, None, now)


def park_run(
    run_id: str,
    lease: Lease,
    status: str,
    wake_at: float | None,
    waiting_for: str | None,
    now: float,
    waits_on: Sequence[str] | None = None,
    futile_wakes: int = 0,
) -> Program[None]:
    """Park a run (SLEEPING, WAITING, PAUSED) and release it.

    A WAITING run records the channels its open waits consume (`waits_on`, None: any).
    """
    due = wake_at
    channels = None if waits_on is None else json.dumps(list(waits_on))
    if status == "WAITING":
        # A message its waits take arrived while the run was deciding to wait.
        if channels is None:
            found = yield one_row(_sql.HAS_MESSAGES, (run_id,))
        else:
            found = yield one_row(_sql.HAS_MESSAGES_ON, (run_id, channels))
        if found:
            due = now
    fence = (run_id, lease.owner, lease.fence)
    params = (status, due, waiting_for, channels, futile_wakes, now, *fence)
    if not (yield Sql(_sql.PARK_RUN, params)):
        raise LeaseLost(run_id)
    # A cancel or pause that came after the run's last durable point is acted on now.
    yield Sql(_sql.PARKED_CONTROL, (now, run_id))


def update_run_meta(
    run_id: str, columns: dict[str, str] | None, progress: str | None, now: float
) -> Program[None]:
    """Merge indexed columns and set progress."""
    merged = None
    if columns:
        # Lock the run row first: concurrent merges (a step and its workflow setting
        # columns at once) then see each other's columns instead of overwriting them.
        row = yield Sql(_sql.SELECT_RUN_CREATED, (run_id,), "one", "update")
        if row is None:
            return  # no such run: nothing to describe
        for name, value in columns.items():
            yield Sql(_sql.INSERT_COLUMN, (run_id, name, value, row[0]))
        rows = yield all_rows(_sql.SELECT_COLUMNS, (run_id,))
        merged = _sql.columns_json(rows)
    yield Sql(_sql.UPDATE_META, (merged, progress, now, run_id))


# journal


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
    if status == "WAITING" and waits_on is not None:
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


def submit_task(
    task_id: str, values: str, by: str | None, now: float
) -> Program[TaskRecord | None]:
    """Submit an open task and queue its values; None if it is not open."""
    if not (yield Sql(_sql.SUBMIT_TASK, (now, by, values, task_id))):
        return None
    task = _sql.task_from_row((yield one_row(_sql.SELECT_TASK, (task_id,))))
    channel = f"task:{task_id}"
    yield Sql(_sql.INSERT_MESSAGE, (task.run_id, channel, values, None, now))
    yield Sql(_sql.WAKE_WAITING, (now, task.run_id, channel))
    return task


# operator control


def control_run(run_id: str, action: str, now: float) -> Program[str | None]:
    """Apply cancel / pause / resume; the status after, None if no such run."""
    row = yield one_row(_sql.SELECT_CONTROL_STATE, (run_id,))
    if row is None:
        return None
    status, attempt, _owner = row
    status = str(status)
    if status in FINISHED:
        return status
    if action == "cancel":
        if status in ("PENDING", "PAUSED") and attempt == 0:
            yield Sql(_sql.CANCEL_UNSTARTED, (now, now, run_id))
            yield from after_finish(run_id, "CANCELLED", None, None, now)
            return "CANCELLED"
        if status == "PAUSED":
            yield Sql(_sql.RESUME_PAUSED, (now, now, run_id))
        if status in ("SLEEPING", "WAITING", "PENDING", "PAUSED"):
            yield Sql(_sql.SET_CONTROL_AND_WAKE, ("cancel", now, now, run_id))
        else:
            yield Sql(_sql.SET_CONTROL, ("cancel", now, run_id))
        return status
    if action == "pause":
        if status in ("SLEEPING", "WAITING", "PENDING"):
            yield Sql(_sql.PAUSE_PARKED, (now, run_id))
            return "PAUSED"
        if status == "RUNNING":
            yield Sql(_sql.SET_CONTROL, ("pause", now, run_id))
        return status
    if action == "resume":
        if status == "PAUSED":
            yield Sql(_sql.RESUME_PAUSED, (now, now, run_id))
            return "PENDING" if attempt == 0 else "WAITING"
        if status == "RUNNING":
            yield Sql(_sql.SET_CONTROL, (None, now, run_id))
        return status
    raise ValueError(f"unknown control action {action!r} (cancel, pause or resume)")


def retry_run(run_id: str, now: float, by: str | None) -> Program[bool]:
    """Requeue a FAILED run as its next execution; False if not FAILED.

    A failed last entry moves from the journal to retried_steps, so that its step runs
    again and the history still shows how it failed.
    """
    row = yield Sql(_sql.SELECT_EXECUTION, (run_id,), "one", "update")
    if row is None:
        return False
    last = yield one_row(_sql.LAST_STEP, (run_id,))
    if not (yield Sql(_sql.REQUEUE_FAILED, (now, run_id))):
        return False
    from_seq = 1 if last is None else int(last[2]) + 1
    if last is not None and last[1] == "failed":
        key, seq = last[0], int(last[2])
        found = yield one_row(_sql.EXECUTION_OF_SEQ, (run_id, seq))
        recorded_in = 1 if found is None or found[0] is None else int(found[0])
        yield Sql(_sql.RETIRE_STEP, (recorded_in, run_id, key))
        yield Sql(_sql.DELETE_STEP, (run_id, key))
        from_seq = seq
    execution = int(row[0]) + 1
    yield Sql(_sql.INSERT_EXECUTION, (run_id, execution, now, "retry", by, from_seq))
    return True


def copy_run(
    new_run: RunRecord, source_id: str, before_seq: int | None, by: str | None, now: float
) -> Program[None]:
    """Create `new_run` as a copy of the source: a restart, or a fork before `before_seq`.

    A fork takes the source's entries before `before_seq` that are not "waiting".
    """
    yield Sql(_sql.INSERT_RUN, _sql.run_params(new_run))
    cause = "restart" if before_seq is None else "fork"
    if before_seq is not None:
        yield Sql(_sql.COPY_STEPS, (new_run.run_id, source_id, before_seq))
    params = (new_run.run_id, 1, now, cause, by, before_seq or 1)
    yield Sql(_sql.INSERT_EXECUTION, params)


def lineage(run_id: str) -> Program[Lineage]:
    """A run's executions, the entries retries took out of its journal, and its copies."""
    executions = yield all_rows(_sql.SELECT_EXECUTIONS, (run_id,))
    retried = yield all_rows(_sql.SELECT_RETRIED, (run_id,))
    copies = yield all_rows(_sql.SELECT_COPIES, (run_id, run_id))
    return Lineage(
        [_sql.execution_from_row(row) for row in executions],
        [RetriedStep(int(row[0]), _sql.step_from_row(row[1:])) for row in retried],
        [_sql.run_from_row(row) for row in copies],
    )
