"""Transaction bodies shared by every SQL backend, written once as "programs".

A program is a generator that yields `Sql` statements and receives each one's result (a
row count, one row, or all rows); its return value is the transaction's result. Backends
only run programs (`SqliteStore` synchronously, `PostgresStore` with await), so the logic
of claiming, fencing, waking and control lives here and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from types import CodeType
from typing import Any, Literal, TypeVar
from urllib.parse import quote

from cairn import ids
from cairn.errors import DuplicateRun
from cairn.store import _sql
from cairn.store.protocol import LeaseLost
from cairn.store.records import (
    AttemptRecord,
    Beat,
    Claimed,
    Fired,
    HookRecord,
    Lease,
    QueueRecord,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    Subscription,
    TaskRecord,
    WorkerRecord,
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


def _one(text: str, params: Sequence[Any] = ()) -> Sql:
    return Sql(text, params, "one")


def _all(text: str, params: Sequence[Any] = (), *, lock: bool = False) -> Sql:
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
        return _sql.run_from_row((yield _one(_sql.SELECT_RUN, (run.run_id,))))
    row = yield _one(_sql.SELECT_RUN, (run.run_id,))
    if row is not None:
        return _sql.run_from_row(row)
    if run.dedup_key is not None:
        holder = yield _one(_sql.SELECT_ACTIVE_DEDUP, (run.queue or "", run.dedup_key))
        if holder is not None:
            where = f" in queue {run.queue!r}" if run.queue else ""
            raise DuplicateRun(
                f"dedup key {run.dedup_key!r}{where} is held by active run {holder[0]!r}",
                run_id=str(holder[0]),
                dedup_key=run.dedup_key,
            )
    if (yield Sql(_sql.INSERT_RUN, _sql.run_params(run))):
        return None
    row = yield _one(_sql.SELECT_RUN, (run.run_id,))
    return _sql.run_from_row(row)


def get_run(run_id: str) -> Program[RunRecord | None]:
    """The run, or None."""
    row = yield _one(_sql.SELECT_RUN, (run_id,))
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
    yield from _after_finish(run_id, status, result, error, now)


def _after_finish(
    run_id: str, status: str, result: str | None, error: str | None, now: float
) -> Program[None]:
    row = yield _one(_sql.SELECT_PARENT, (run_id,))
    if row is not None and row[0] is not None:
        message = _sql.child_message(run_id, status, result, error)
        yield Sql(_sql.INSERT_MESSAGE, (row[0], f"child:{run_id}", message, None, now))
        yield Sql(_sql.WAKE_WAITING, (now, row[0]))
    yield Sql(_sql.CANCEL_CHILDREN, (now, now, run_id))
    # Nobody will wait for the run's open tasks any more: withdraw them from the inbox.
    yield Sql(_sql.CLOSE_TASKS, ("cancelled", run_id, None, None))


def continue_run(run_id: str, lease: Lease, new_run: RunRecord, now: float) -> Program[None]:
    """End a run CONTINUED and create its successor."""
    params = (new_run.run_id, now, now, run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.CONTINUE_RUN, params)):
        raise LeaseLost(run_id)
    yield Sql(_sql.INSERT_RUN, _sql.run_params(new_run))
    # A parent waiting on this run learns the successor's id (in `result`).
    yield from _after_finish(run_id, "CONTINUED", new_run.run_id, None, now)


def park_run(
    run_id: str,
    lease: Lease,
    status: str,
    wake_at: float | None,
    waiting_for: str | None,
    now: float,
) -> Program[None]:
    """Park a run (SLEEPING, WAITING, PAUSED) and release it."""
    due = wake_at
    if status == "WAITING" and (yield _one(_sql.HAS_MESSAGES, (run_id,))):
        due = now  # a message arrived while the run was deciding to wait
    params = (status, due, waiting_for, now, run_id, lease.owner, lease.fence)
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
        rows = yield _all(_sql.SELECT_COLUMNS, (run_id,))
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
) -> Program[str | None]:
    """Queue a message and wake a waiting run; the run's status, None if unknown."""
    row = yield _one(_sql.SELECT_STATUS, (run_id,))
    if row is None or row[0] in FINISHED:
        return None if row is None else str(row[0])
    yield Sql(_sql.INSERT_MESSAGE, (run_id, channel, payload, idempotency_key, now))
    yield Sql(_sql.WAKE_WAITING, (now, run_id))
    return str(row[0])


def consume_message(lease: Lease, channel: str, step: StepRecord) -> Program[str | None]:
    """Take the oldest message on `channel` as the outcome of `step`; None if none."""
    row = yield _one(_sql.SELECT_OLDEST_MESSAGE, (step.run_id, channel))
    if row is None:
        return None
    message_id, payload = row
    params = _sql.step_params(step)
    params = (*params[:9], payload, *params[10:], step.run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.UPSERT_STEP_OWNED, params)):
        raise LeaseLost(step.run_id)
    yield Sql(_sql.CONSUME_MESSAGE, (step.key, message_id))
    return str(payload)


def create_hook(lease: Lease, step: StepRecord, hook: HookRecord) -> Program[None]:
    """Journal a hook's creation and insert its row."""
    yield from record_step(lease, step, upsert=True)
    yield Sql(_sql.INSERT_HOOK, _sql.hook_params(hook))


def resume_hook(token: str, payload: str, now: float) -> Program[str | None]:
    """Use a hook once; the run id, or None if unknown, used, expired or its run finished."""
    row = yield _one(_sql.SELECT_HOOK_RUN, (token,))
    if row is None:
        return None
    run_id = row[0]
    state = yield _one(_sql.SELECT_STATUS, (run_id,))
    if state is None or state[0] in FINISHED:
        return None  # nobody will ever wait for it: the caller must not think it delivered
    if not (yield Sql(_sql.USE_HOOK, (now, token, now))):
        return None
    yield Sql(_sql.INSERT_MESSAGE, (run_id, f"hook:{token}", payload, None, now))
    yield Sql(_sql.WAKE_WAITING, (now, run_id))
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
    task = _sql.task_from_row((yield _one(_sql.SELECT_TASK, (task_id,))))
    yield Sql(_sql.INSERT_MESSAGE, (task.run_id, f"task:{task_id}", values, None, now))
    yield Sql(_sql.WAKE_WAITING, (now, task.run_id))
    return task


# operator control


def control_run(run_id: str, action: str, now: float) -> Program[str | None]:
    """Apply cancel / pause / resume; the status after, None if no such run."""
    row = yield _one(_sql.SELECT_CONTROL_STATE, (run_id,))
    if row is None:
        return None
    status, attempt, _owner = row
    status = str(status)
    if status in FINISHED:
        return status
    if action == "cancel":
        if status in ("PENDING", "PAUSED") and attempt == 0:
            yield Sql(_sql.CANCEL_UNSTARTED, (now, now, run_id))
            yield from _after_finish(run_id, "CANCELLED", None, None, now)
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


def retry_run(run_id: str, now: float) -> Program[bool]:
    """Requeue a FAILED run, forgetting its last failed entry; False if not FAILED."""
    last = yield _one(_sql.LAST_STEP, (run_id,))
    if not (yield Sql(_sql.REQUEUE_FAILED, (now, run_id))):
        return False
    if last is not None and last[1] == "failed":
        yield Sql(_sql.DELETE_STEP, (run_id, last[0]))
        yield Sql(_sql.DELETE_ATTEMPTS, (run_id, last[0]))
    return True


def fork_run(new_run: RunRecord, source_id: str, before_seq: int) -> Program[None]:
    """Create `new_run` with the source's completed entries before `before_seq`."""
    yield Sql(_sql.INSERT_RUN, _sql.run_params(new_run))
    yield Sql(_sql.COPY_STEPS, (new_run.run_id, source_id, before_seq))


# workers and claims


def register_worker(worker: WorkerRecord) -> Program[None]:
    """Insert or refresh a worker row."""
    yield Sql(_sql.UPSERT_WORKER, _sql.worker_params(worker))


def beat(worker: WorkerRecord) -> Program[Beat]:
    """Mark the worker alive (by the database's clock); what it holds, and every worker.

    A worker whose row is gone (removed while it was presumed dead) registers again.
    """
    if not (yield Sql(_sql.HEARTBEAT, (worker.worker_id,))):
        yield Sql(_sql.UPSERT_WORKER, _sql.worker_params(worker))
    owned = yield _all(_sql.SELECT_OWNED, (worker.worker_id,))
    workers = yield _all(_sql.SELECT_WORKERS)
    return Beat(
        {str(run_id): int(fence) for run_id, fence in owned},
        [_sql.worker_from_row(row) for row in workers],
    )


def expire_workers(worker_ids: Sequence[str]) -> Program[None]:
    """Mark workers dead now."""
    for worker_id in worker_ids:
        yield Sql(_sql.EXPIRE_WORKER, (worker_id,))


def release_run(run_id: str, lease: Lease, now: float) -> Program[bool]:
    """Queue again a run `lease` still holds, for any worker (this one too) to claim."""
    return bool((yield Sql(_sql.RELEASE_ONE, (now, run_id, lease.owner, lease.fence))))


def remove_worker(worker_id: str, now: float) -> Program[None]:
    """Delete a worker and hand its running runs back to PENDING."""
    yield Sql(_sql.RELEASE_OWNED, (now, worker_id))
    yield Sql(_sql.DELETE_WORKER, (worker_id,))


def claim_runs(
    worker_id: str,
    limit: int,
    now: float,
    stale: bool,
    queues: list[str] | None = None,
    workflows: list[str] | None = None,
    versions: dict[str, str] | None = None,
    orphans_first: bool = False,
) -> Program[Claimed]:
    """Take due runs, then pending and orphaned ones (see Store.claim_runs).

    Pending runs of a queue are taken only while the queue's limits allow; a run held back
    gets `waiting_for` saying which limit holds it.
    """
    claimed: list[str] = []
    poisoned: dict[str, str] = {}
    due_at: dict[str, float] = {}
    # A worker only takes runs of workflows it can execute (None: it knows them all).
    known = tuple(workflows or ())
    woken = _sql.restrict(_sql.SELECT_WOKEN, "workflow", workflows)
    due = yield _all(woken, (*known, now, limit), lock=True)
    for run_id, status, wake_at in due:
        # A waking sleeper is the same attempt going on, so its attempt does not grow.
        if (yield Sql(_sql.CLAIM_ONE, (worker_id, 0, 0, now, now, run_id, status))):
            claimed.append(run_id)
            due_at[run_id] = float(wake_at)
    if orphans_first:
        yield from _claim_orphans(worker_id, limit, stale, known, workflows, claimed, poisoned, now)
    if len(claimed) < limit:
        # Over-fetch: some candidates may be held back by their queue's limits.
        want = (limit - len(claimed)) * 4
        text = _sql.restrict(
            _sql.restrict(_sql.SELECT_PENDING, "queue", queues), "workflow", workflows
        )
        pending = yield _all(text, (*known, *(queues or ()), now, want), lock=True)
        gate = _QueueGate(worker_id, now)
        for run_id, _status, queue, partition, waiting_for, workflow, since in pending:
            if len(claimed) >= limit:
                break
            if queue is not None:
                held = yield from gate.held(queue, partition)
                if held is not None:
                    if held != waiting_for:
                        yield Sql(_sql.SET_WAITING_FOR, (held, run_id))
                    continue
            if (yield Sql(_sql.CLAIM_ONE, (worker_id, 1, 0, now, now, run_id, "PENDING"))):
                claimed.append(run_id)
                due_at[run_id] = float(since)
                version = (versions or {}).get(str(workflow))
                if version is not None:
                    yield Sql(_sql.SET_VERSION, (version, run_id))
                if queue is not None:
                    gate.took(queue, partition)
    if not orphans_first:
        yield from _claim_orphans(worker_id, limit, stale, known, workflows, claimed, poisoned, now)
    runs = []
    for run_id in claimed:
        runs.append(_sql.run_from_row((yield _one(_sql.SELECT_RUN, (run_id,)))))
    return Claimed(runs, poisoned, due_at)


def _claim_orphans(
    worker_id: str,
    limit: int,
    stale: bool,
    known: tuple[str, ...],
    workflows: list[str] | None,
    claimed: list[str],
    poisoned: dict[str, str],
    now: float,
) -> Program[None]:
    """Take RUNNING runs whose owner is dead, while `claimed` has room (see claim_runs)."""
    room = limit - len(claimed)
    if room > 0:
        text = _sql.SELECT_ORPHANED if stale else _sql.SELECT_ORPHANED_DEAD
        orphaned = _sql.restrict(text, "workflow", workflows)
        orphans = yield _all(orphaned, (*known, worker_id, room), lock=True)
        for run_id, recoveries, max_recoveries, workflow in orphans:
            if recoveries >= max_recoveries:
                error = _sql.poison_error(run_id, recoveries)
                yield Sql(_sql.POISON_ONE, (error, now, now, run_id))
                yield from _after_finish(run_id, "FAILED", None, error, now)
                poisoned[run_id] = str(workflow)
            elif (yield Sql(_sql.CLAIM_ONE, (worker_id, 1, 1, now, now, run_id, "RUNNING"))):
                claimed.append(run_id)


class _QueueGate:
    """Counts of one claim transaction, per queue, checked against the queue's limits."""

    def __init__(self, worker_id: str, now: float) -> None:
        self.worker_id = worker_id
        self.now = now
        self.limits: dict[str, QueueRecord | None] = {}
        self.counts: dict[tuple[str, str], int] = {}

    def _count(self, key: tuple[str, str], text: str, params: tuple[Any, ...]) -> Program[int]:
        if key not in self.counts:
            row = yield _one(text, params)
            self.counts[key] = int(row[0])
        return self.counts[key]

    def held(self, queue: str, partition: str | None) -> Program[str | None]:
        """Why a run of `queue` cannot start now, or None if it can."""
        if queue not in self.limits:
            row = yield Sql(_sql.SELECT_QUEUE, (queue,), "one", "update")
            self.limits[queue] = None if row is None else QueueRecord(*row)
        limits = self.limits[queue]
        if limits is None:
            return None
        name = f"queue {queue!r}"
        if limits.concurrency is not None:
            n = yield from self._count((queue, "all"), _sql.COUNT_EXECUTING, (queue,))
            if n >= limits.concurrency:
                return f"{name}: concurrency limit {limits.concurrency} reached"
        if limits.per_worker is not None:
            key = (queue, "mine")
            n = yield from self._count(key, _sql.COUNT_EXECUTING_MINE, (queue, self.worker_id))
            if n >= limits.per_worker:
                return f"{name}: per-worker limit {limits.per_worker} reached"
        if limits.partition_concurrency is not None and partition is not None:
            key = (queue, f"p:{partition}")
            n = yield from self._count(key, _sql.COUNT_EXECUTING_PARTITION, (queue, partition))
            if n >= limits.partition_concurrency:
                return (
                    f"{name}: partition {partition!r} limit {limits.partition_concurrency} reached"
                )
        if limits.rate_count is not None and limits.rate_period is not None:
            since = self.now - limits.rate_period
            n = yield from self._count((queue, "rate"), _sql.COUNT_STARTS, (queue, since))
            if n >= limits.rate_count:
                return f"{name}: rate limit {limits.rate_count}/{limits.rate_period:g}s reached"
        return None

    def took(self, queue: str, partition: str | None) -> None:
        """Count a run of `queue` just claimed."""
        for kind in ("all", "mine", "rate", f"p:{partition}"):
            key = (queue, kind)
            if key in self.counts:
                self.counts[key] += 1


def declare_queue(queue: QueueRecord, declared: str, now: float) -> Program[None]:
    """Store a code declaration's limits if the declaration changed since last stored."""
    yield Sql(
        _sql.DECLARE_QUEUE,
        (
            queue.name,
            queue.concurrency,
            queue.per_worker,
            queue.rate_count,
            queue.rate_period,
            queue.partition_concurrency,
            declared,
            now,
        ),
    )


def update_queue(queue: QueueRecord, now: float) -> Program[None]:
    """Set a queue's limits (an operator's change, live)."""
    yield Sql(
        _sql.UPSERT_QUEUE_LIMITS,
        (
            queue.name,
            queue.concurrency,
            queue.per_worker,
            queue.rate_count,
            queue.rate_period,
            queue.partition_concurrency,
            now,
        ),
    )


def list_queues() -> Program[list[QueueRecord]]:
    """Every queue with stored limits."""
    rows = yield _all(_sql.SELECT_QUEUES)
    return [QueueRecord(*row) for row in rows]


# schedules


def create_schedule(schedule: ScheduleRecord) -> Program[bool]:
    """Insert a new schedule; False (nothing written) if its id is taken."""
    return bool((yield Sql(_sql.INSERT_SCHEDULE, _sql.schedule_params(schedule))))


# The columns of a schedule that its declaration sets (the rest is tick state).
_SCHEDULE_DEFINITION = (
    "workflow",
    "cron",
    "every",
    "tz",
    "overlap",
    "catchup",
    "args",
    "queue",
    "max_recoveries",
    "source",
)


def sync_schedule(schedule: ScheduleRecord) -> Program[ScheduleRecord]:
    """Insert a declared schedule, or bring the stored one up to date with it.

    Operator state (paused, last run, a buffered tick) is kept, and so is the next tick
    unless the timing (cron, every, tz) changed, so ticks missed while no engine ran are
    still caught up.
    """
    if (yield Sql(_sql.INSERT_SCHEDULE, _sql.schedule_params(schedule))):
        return schedule
    row = yield _one(_sql.SELECT_SCHEDULE, (schedule.schedule_id,))
    stored = _sql.schedule_from_row(row)
    definition = _SCHEDULE_DEFINITION
    if all(getattr(stored, name) == getattr(schedule, name) for name in definition):
        return stored
    timing = ("cron", "every", "tz")
    retimed = any(getattr(stored, name) != getattr(schedule, name) for name in timing)
    next_tick = schedule.next_tick if retimed else stored.next_tick
    params = [getattr(schedule, name) for name in definition]
    yield Sql(
        _sql.UPDATE_SCHEDULE_DEFINITION,
        (*params, next_tick, schedule.updated_at, schedule.schedule_id),
    )
    return _sql.schedule_from_row((yield _one(_sql.SELECT_SCHEDULE, (schedule.schedule_id,))))


def set_schedule_paused(
    schedule_id: str, paused: bool, next_tick: float | None, now: float
) -> Program[ScheduleRecord | None]:
    """Pause or resume a schedule (resuming sets `next_tick`); None if unknown."""
    params = (1 if paused else 0, next_tick, now, schedule_id)
    if not (yield Sql(_sql.SET_SCHEDULE_PAUSED, params)):
        return None
    return _sql.schedule_from_row((yield _one(_sql.SELECT_SCHEDULE, (schedule_id,))))


def delete_schedule(schedule_id: str) -> Program[bool]:
    """Delete a schedule; False if unknown. Its runs are left alone."""
    return bool((yield Sql(_sql.DELETE_SCHEDULE, (schedule_id,))))


def fire_schedule(
    schedule_id: str,
    expected_next: float,
    new_next: float,
    ticks: Sequence[tuple[float, str]],
    now: float,
) -> Program[Fired | None]:
    """Move the next tick from `expected_next` to `new_next` and fire `ticks`.

    `ticks` are (tick time, run id) pairs. None (nothing written) when the next tick is no
    longer `expected_next`: another engine fired it, or the schedule was paused or changed.
    """
    if not (yield Sql(_sql.ADVANCE_SCHEDULE, (new_next, now, schedule_id, expected_next))):
        return None
    schedule = _sql.schedule_from_row((yield _one(_sql.SELECT_SCHEDULE, (schedule_id,))))
    started: list[str] = []
    cancelled: list[str] = []
    skipped = 0
    buffered = schedule.buffered_tick
    last = schedule.last_run_id
    for tick, run_id in ticks:
        active = None
        if schedule.overlap != "allow":
            active = yield from _active_run(last)
        if active is not None:
            if schedule.overlap == "buffer_one" and buffered is None:
                buffered = tick
                continue
            if schedule.overlap != "cancel_other":
                skipped += 1
                continue
            yield from control_run(active, "cancel", now)
            cancelled.append(active)
        yield Sql(_sql.INSERT_RUN, _sql.run_params(_scheduled_run(schedule, run_id, tick, now)))
        started.append(run_id)
        last = run_id
    yield Sql(_sql.SET_SCHEDULE_STATE, (buffered, last, now, schedule_id))
    return Fired(started, cancelled, skipped, buffered is not None)


def release_buffered(
    schedule_id: str, tick: float, run_id: str, now: float
) -> Program[Fired | None]:
    """Start the buffered `tick` once the schedule's active run has ended.

    None (nothing written) while that run is active, or if the tick is no longer buffered.
    """
    row = yield _one(_sql.SELECT_SCHEDULE, (schedule_id,))
    if row is None:
        return None
    schedule = _sql.schedule_from_row(row)
    if schedule.paused or schedule.buffered_tick != tick:
        return None
    if (yield from _active_run(schedule.last_run_id)) is not None:
        return None
    if not (yield Sql(_sql.TAKE_BUFFERED, (now, schedule_id, tick))):
        return None
    yield Sql(_sql.INSERT_RUN, _sql.run_params(_scheduled_run(schedule, run_id, tick, now)))
    yield Sql(_sql.SET_SCHEDULE_LAST_RUN, (run_id, now, schedule_id))
    return Fired([run_id], [])


def trigger_schedule(schedule_id: str, run_id: str, now: float) -> Program[RunRecord | None]:
    """Start one run of the schedule now, whatever its overlap policy; None if unknown."""
    row = yield _one(_sql.SELECT_SCHEDULE, (schedule_id,))
    if row is None:
        return None
    run = _scheduled_run(_sql.schedule_from_row(row), run_id, now, now)
    yield Sql(_sql.INSERT_RUN, _sql.run_params(run))
    yield Sql(_sql.SET_SCHEDULE_LAST_RUN, (run_id, now, schedule_id))
    return run


def _scheduled_run(schedule: ScheduleRecord, run_id: str, tick: float, now: float) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        workflow=schedule.workflow,
        status="PENDING",
        args=schedule.args,
        created_at=now,
        updated_at=now,
        max_recoveries=schedule.max_recoveries,
        queue=schedule.queue,
        scheduled_at=tick,
    )


def _active_run(run_id: str | None) -> Program[str | None]:
    """The unfinished run of a chain that starts at `run_id` (following continue_as_new)."""
    for _ in range(100):
        if run_id is None:
            return None
        row = yield _one(_sql.SELECT_RUN_CHAIN, (run_id,))
        if row is None:
            return None
        status, continued_to = row
        if status == "CONTINUED" and continued_to is not None:
            run_id = str(continued_to)
            continue
        return None if status in FINISHED else run_id
    return run_id  # a very long chain: take it as active rather than start another


# event triggers


def sync_subscriptions(
    workflows: Sequence[tuple[str, str | None, str | None, int]], now: float
) -> Program[None]:
    """Store which event type each (workflow, on, queue, max_recoveries) subscribes to.

    A workflow with `on` None loses its subscriptions; workflows not listed are untouched.
    """
    for workflow, event_type, queue, max_recoveries in workflows:
        if event_type is None:
            yield Sql(_sql.DELETE_SUBSCRIPTIONS, (workflow,))
            continue
        yield Sql(_sql.DELETE_OTHER_SUBSCRIPTIONS, (workflow, event_type))
        yield Sql(_sql.UPSERT_SUBSCRIPTION, (event_type, workflow, queue, max_recoveries, now))


def list_subscriptions() -> Program[list[Subscription]]:
    """Every stored subscription, by event type then workflow."""
    rows = yield _all(_sql.SELECT_SUBSCRIPTIONS)
    return [Subscription(str(t), str(w), q, int(m)) for t, w, q, m in rows]


def emit_run_id(event_type: str, key: str, workflow: str) -> str:
    """The id of the run a keyed emit starts for `workflow` (readable and injective)."""
    parts = (quote(part, safe="@.-_~+") for part in (event_type, key, workflow))
    return "emit:" + ":".join(parts)


def emit_event(
    event_type: str,
    args: str,
    key: str | None,
    now: float,
    local: Sequence[Subscription],
    lease: Lease | None = None,
    step: StepRecord | None = None,
    trace_context: str | None = None,
) -> Program[list[str]]:
    """Start every subscriber of `event_type` with `args`; their run ids (see Store.emit)."""
    if step is not None:
        assert lease is not None
        if not (yield Sql(_sql.TOUCH_OWNED, (now, step.run_id, lease.owner, lease.fence))):
            raise LeaseLost(step.run_id)
    run_ids: list[str] | None = None
    if key is not None:
        row = yield _one(_sql.SELECT_EMIT_KEY, (event_type, key))
        if row is not None:
            run_ids = [str(run_id) for run_id in json.loads(row[0])]
    if run_ids is None:
        rows = yield _all(_sql.SELECT_SUBSCRIBERS, (event_type,))
        subscribers = {str(r[1]): Subscription(str(r[0]), str(r[1]), r[2], int(r[3])) for r in rows}
        subscribers.update({s.workflow: s for s in local if s.event_type == event_type})
        run_ids = []
        for name in sorted(subscribers):
            sub = subscribers[name]
            run_id = ids.new_run_id() if key is None else emit_run_id(event_type, key, name)
            run = RunRecord(
                run_id=run_id,
                workflow=name,
                status="PENDING",
                args=args,
                created_at=now,
                updated_at=now,
                max_recoveries=sub.max_recoveries,
                queue=sub.queue,
                trace_context=trace_context,
            )
            yield Sql(_sql.INSERT_RUN, _sql.run_params(run))
            run_ids.append(run_id)
        if key is not None and run_ids:
            yield Sql(_sql.INSERT_EMIT_KEY, (event_type, key, json.dumps(run_ids), now))
            # A concurrent emit of the same key may have stored its ids first: use those.
            (stored,) = yield _one(_sql.SELECT_EMIT_KEY, (event_type, key))
            run_ids = [str(run_id) for run_id in json.loads(stored)]
    if step is not None:
        assert lease is not None
        yield from record_step(lease, replace(step, result=json.dumps(run_ids)))
    return run_ids
