"""SqlStore: the Store protocol over programs; a backend supplies only how to run them.

Backends implement `open`, `close`, `write` (run a program in a write transaction and
commit before answering) and `read` (run a program without one). Everything else is here,
once, for both dialects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cairn.store import _sql
from cairn.store._health import StoreHealth
from cairn.store.programs import claims, control, journal, prune, runs, schedules, step_tasks
from cairn.store.programs.base import Program, Sql
from cairn.store.protocol import SideChannel
from cairn.store.records import (
    AttemptRecord,
    Beat,
    Claimed,
    Counts,
    Delivery,
    Fired,
    HookRecord,
    Lease,
    Lineage,
    Pruned,
    PruneQuery,
    QueueRecord,
    RunQuery,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    StepTaskRecord,
    Subscription,
    TaskRecord,
    WorkerRecord,
)

T = TypeVar("T")


def _rows(text: str, params: Sequence[Any] = ()) -> Program[list[Any]]:
    rows: list[Any] = yield Sql(text, params, "all")
    return rows


def _rows_count(text: str, params: Sequence[Any] = ()) -> Program[int]:
    count: int = yield Sql(text, params)
    return count


def _counts() -> Program[Counts]:
    rows = yield Sql(_sql.COUNT_UNFINISHED, (), "all")
    (workers,) = yield Sql(_sql.COUNT_LIVE_WORKERS, (), "one")
    by_status = {(queue, status): int(n) for queue, status, n, _ in rows}
    return Counts(by_status, int(workers), sum(int(spinning or 0) for *_, spinning in rows))


class SqlStore:
    """Every Store method, as a program handed to the backend's `write` or `read`."""

    dialect = "sql"
    wakes_for_timers = False  # see Store.wakes_for_timers
    health: StoreHealth

    async def write(self, make: Callable[[], Program[T]]) -> T:
        """Run the program `make()` builds in a write transaction; return once committed.

        A backend may call `make` again to run the transaction afresh (PostgreSQL does
        when the connection is lost before COMMIT, which the server rolls back).
        """
        raise NotImplementedError

    async def read(self, make: Callable[[], Program[T]]) -> T:
        """Run the read-only program `make()` builds (again, if the backend must retry)."""
        raise NotImplementedError

    def side_channel(self) -> SideChannel | None:
        """A connection of its own for a heartbeat thread (see Store.side_channel)."""
        return None

    # runs

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert `run` unless its run_id exists; returns the stored run and whether it is new."""
        existing = await self.write(lambda: runs.create_run(run))
        return (run, True) if existing is None else (existing, False)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None."""
        return await self.read(lambda: runs.get_run(run_id))

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        """Runs matching `query`, newest first."""
        text, params = _sql.list_runs(query)
        return [_sql.run_from_row(row) for row in await self.read(lambda: _rows(text, params))]

    async def count_runs(self, query: RunQuery, limit: int | None = None) -> dict[str, int]:
        """How many runs match `query` (its status aside), by status (see Store.count_runs)."""
        text, params = _sql.count_runs(query, limit)
        rows = await self.read(lambda: _rows(text, params))
        return {str(status): int(n) for status, n in rows if n}

    async def finish_run(
        self,
        run_id: str,
        lease: Lease,
        status: str,
        *,
        result: str | None,
        error: str | None,
        now: float,
        alone: bool = False,
    ) -> None:
        """End a run held by `lease` (see Store.finish_run)."""
        await self.write(lambda: runs.finish_run(run_id, lease, status, result, error, now, alone))

    async def continue_run(self, run_id: str, lease: Lease, new_run: RunRecord, now: float) -> None:
        """End a run CONTINUED and create its successor."""
        await self.write(lambda: runs.continue_run(run_id, lease, new_run, now))

    async def park_run(
        self,
        run_id: str,
        lease: Lease,
        status: str,
        *,
        wake_at: float | None,
        waiting_for: str | None,
        now: float,
        waits_on: Sequence[str] | None = None,
        futile_wakes: int = 0,
    ) -> None:
        """Park a run and release it (see Store.park_run)."""
        await self.write(
            lambda: runs.park_run(
                run_id, lease, status, wake_at, waiting_for, now, waits_on, futile_wakes
            )
        )

    async def update_run_meta(
        self,
        run_id: str,
        *,
        columns: dict[str, str] | None,
        progress: str | None,
        now: float,
    ) -> None:
        """Merge indexed columns and set progress."""
        await self.write(lambda: runs.update_run_meta(run_id, columns, progress, now))

    async def prune_runs(
        self,
        query: PruneQuery,
        *,
        after: tuple[float, str] | None = None,
        limit: int = 500,
        dry_run: bool = False,
    ) -> Pruned:
        """Delete (or count) one batch of finished runs past retention (see Store.prune_runs)."""
        if limit <= 0:
            raise ValueError(f"limit must be positive, got {limit!r}")
        if dry_run:
            return await self.read(lambda: prune.prune_batch(query, after, limit, True))
        return await self.write(lambda: prune.prune_batch(query, after, limit, False))

    # journal

    async def load_journal(
        self, run_id: str, *, inputs: bool = False, after_seq: int = 0, limit: int | None = None
    ) -> list[StepRecord]:
        """Recorded outcomes in seq order (with each step's input if `inputs`); or a page."""
        text = _sql.SELECT_HISTORY if inputs else _sql.SELECT_JOURNAL
        params: tuple[Any, ...] = (run_id,)
        if after_seq or limit is not None:
            text = text.replace("WHERE run_id = ?", "WHERE run_id = ? AND seq > ?")
            params = (run_id, after_seq)
            if limit is not None:
                text += " LIMIT ?"
                params = (run_id, after_seq, limit)
        rows = await self.read(lambda: _rows(text, params))
        return [_sql.step_from_row(row) for row in rows]

    async def journal_extent(self, run_id: str) -> tuple[int, int]:
        """How many journal entries the run has, and its highest seq."""
        rows = await self.read(lambda: _rows(_sql.JOURNAL_EXTENT, (run_id,)))
        count, top = rows[0] if rows else (0, 0)
        return int(count or 0), int(top or 0)

    async def record_step(self, lease: Lease, step: StepRecord) -> None:
        """Commit a step outcome for a run held by `lease`."""
        await self.write(lambda: journal.record_step(lease, step))

    async def upsert_step(self, lease: Lease, step: StepRecord) -> None:
        """Commit a journal entry that may replace a "waiting" one with the same key."""
        await self.write(lambda: journal.record_step(lease, step, upsert=True))

    async def record_attempt(self, lease: Lease, attempt: AttemptRecord) -> None:
        """Commit a failed attempt."""
        await self.write(lambda: journal.record_attempt(lease, attempt))

    async def load_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Every failed attempt of the run."""
        rows = await self.read(lambda: _rows(_sql.SELECT_ATTEMPTS, (run_id,)))
        return [_sql.attempt_from_row(row) for row in rows]

    # messages, hooks and tasks

    async def send_message(
        self, run_id: str, channel: str, payload: str, *, idempotency_key: str | None, now: float
    ) -> Delivery | None:
        """Queue a message for a run and wake it if it waits for it (see Store.send_message)."""
        return await self.write(
            lambda: journal.send_message(run_id, channel, payload, idempotency_key, now)
        )

    async def consume_message(self, lease: Lease, channel: str, step: StepRecord) -> str | None:
        """Take the oldest message on `channel` as the outcome of `step`."""
        return await self.write(lambda: journal.consume_message(lease, channel, step))

    async def consume_messages(
        self,
        lease: Lease,
        channel: str,
        step: StepRecord,
        *,
        limit: int,
        combine: Callable[[list[str]], str],
    ) -> str | None:
        """Take up to `limit` messages on `channel` as the outcome of `step`."""
        return await self.write(
            lambda: journal.consume_messages(lease, channel, step, limit, combine)
        )

    async def create_hook(self, lease: Lease, step: StepRecord, hook: HookRecord) -> None:
        """Journal a hook's creation and insert its row."""
        await self.write(lambda: journal.create_hook(lease, step, hook))

    async def get_hook(self, token: str) -> HookRecord | None:
        """The hook stored under `token` (a digest), or None."""
        rows = await self.read(lambda: _rows(_sql.SELECT_HOOK, (token,)))
        return _sql.hook_from_row(rows[0]) if rows else None

    async def list_hooks(
        self, *, now: float, run_id: str | None = None, limit: int = 100
    ) -> list[HookRecord]:
        """Hooks that can still be called, oldest first."""
        params = (now, run_id, run_id, limit)
        rows = await self.read(lambda: _rows(_sql.SELECT_OPEN_HOOKS, params))
        return [_sql.hook_from_row(row) for row in rows]

    async def resume_hook(self, token: str, payload: str, *, now: float) -> str | None:
        """Use a hook once; the run id, None if unknown, used or expired."""
        return await self.write(lambda: journal.resume_hook(token, payload, now))

    async def create_task(self, lease: Lease, step: StepRecord, task: TaskRecord) -> None:
        """Journal a human task's creation and insert its row."""
        await self.write(lambda: journal.create_task(lease, step, task))

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        rows = await self.read(lambda: _rows(_sql.SELECT_TASK, (task_id,)))
        return _sql.task_from_row(rows[0]) if rows else None

    async def list_tasks(
        self, *, status: str | None, assignee: str | None, run_id: str | None = None
    ) -> list[TaskRecord]:
        """Tasks matching the filters, oldest first."""
        text, params = _sql.list_tasks(status, assignee, run_id)
        return [_sql.task_from_row(row) for row in await self.read(lambda: _rows(text, params))]

    async def submit_task(
        self, task_id: str, values: str, *, by: str | None, now: float
    ) -> TaskRecord | None:
        """Submit an open task; None if it is not open."""
        return await self.write(lambda: journal.submit_task(task_id, values, by, now))

    async def close_tasks(self, run_id: str, status: str, task_id: str | None = None) -> None:
        """Give a run's open tasks (or just `task_id`) a final status."""
        await self.write(lambda: _rows(_sql.CLOSE_TASKS, (status, run_id, task_id, task_id)))

    # step queues (see store/programs/step_tasks.py)

    async def enqueue_step_task(self, lease: Lease, task: StepTaskRecord) -> None:
        """Send an attempt to its step queue (once). Raises LeaseLost if the run is not held."""
        await self.write(lambda: step_tasks.enqueue(lease, task))

    async def claim_step_tasks(
        self,
        queues: Sequence[str],
        worker_id: str,
        *,
        lease: float,
        limit: int,
        only: str | None = None,
    ) -> list[StepTaskRecord]:
        """Take up to `limit` attempts waiting on `queues` (or left by a silent worker)."""
        if not queues:
            return []
        return await self.write(
            lambda: step_tasks.claim(list(queues), worker_id, lease, limit, only)
        )

    async def claimable_step_tasks(self, *, limit: int) -> list[tuple[str, str, int]]:
        """(task id, queue, claims) of attempts a worker of their queue could claim now."""
        return await self.read(lambda: step_tasks.claimable(limit))

    async def renew_step_task(self, task: StepTaskRecord, *, lease: float) -> bool:
        """Extend the claim's lease; False if it was taken over or the run is over."""
        params = (lease, task.task_id, task.claims)
        return bool(await self.write(lambda: _rows_count(step_tasks.RENEW, params)))

    async def report_step_task(
        self, task: StepTaskRecord, channel: str, payload: str, *, now: float
    ) -> bool:
        """Close the attempt and send its outcome to the run (see step_tasks.report)."""
        return await self.write(lambda: step_tasks.report(task, channel, payload, now))

    async def drop_step_task(self, task: StepTaskRecord, *, now: float) -> None:
        """Close an attempt whose run ended while it executed (no outcome is sent)."""
        params = ("dropped", now, task.task_id, task.claims)
        await self.write(lambda: _rows_count(step_tasks.CLOSE, params))

    async def release_step_task(self, task: StepTaskRecord) -> None:
        """Hand an attempt held by this claim back to its queue, for any worker to take."""
        params = (task.task_id, task.claims)
        await self.write(lambda: _rows_count(step_tasks.RELEASE, params))

    async def list_step_tasks(self, run_id: str) -> list[StepTaskRecord]:
        """The run's attempts sent to step queues, oldest first."""
        rows = await self.read(lambda: _rows(step_tasks.SELECT_OF_RUN, (run_id,)))
        return [step_tasks.from_row(row) for row in rows]

    # operator control

    async def control_run(self, run_id: str, action: str, *, now: float) -> str | None:
        """Apply cancel / pause / resume (see Store.control_run)."""
        return await self.write(lambda: control.control_run(run_id, action, now))

    async def controlled_runs(self, owner: str) -> list[tuple[str, str]]:
        """(run_id, control) of runs owned by `owner` with a pending request."""
        rows = await self.read(lambda: _rows(_sql.SELECT_CONTROLLED, (owner,)))
        return [(str(run_id), str(control)) for run_id, control in rows]

    async def retry_run(self, run_id: str, *, now: float, by: str | None = None) -> bool:
        """Requeue a FAILED run as its next execution; False if not FAILED."""
        return await self.write(lambda: control.retry_run(run_id, now, by))

    async def copy_run(
        self,
        new_run: RunRecord,
        source_id: str,
        *,
        before_seq: int | None,
        by: str | None = None,
        now: float,
    ) -> None:
        """Create `new_run` as a restart or fork of the source (see Store.copy_run)."""
        await self.write(lambda: control.copy_run(new_run, source_id, before_seq, by, now))

    async def load_lineage(self, run_id: str) -> Lineage:
        """The run's executions, retried entries and copies (see Store.load_lineage)."""
        return await self.read(lambda: control.lineage(run_id))

    # workers and claims

    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or refresh a worker row."""
        await self.write(lambda: claims.register_worker(worker))

    async def beat(self, worker: WorkerRecord, let_go: Sequence[tuple[str, int]] = ()) -> Beat:
        """Mark the worker alive by the database's clock; what it holds, every worker."""
        return await self.write(lambda: claims.beat(worker, let_go, time.time()))

    async def list_workers(self) -> list[WorkerRecord]:
        """Every worker row."""
        return [
            _sql.worker_from_row(row) for row in await self.read(lambda: _rows(_sql.SELECT_WORKERS))
        ]

    async def get_worker(self, worker_id: str) -> WorkerRecord | None:
        """The worker row, or None."""
        rows = await self.read(lambda: _rows(_sql.SELECT_WORKER, (worker_id,)))
        return _sql.worker_from_row(rows[0]) if rows else None

    async def known_workflows(self, within: float) -> set[str] | None:
        """Workflows known to workers seen in the last `within` seconds (see Store)."""
        return await self.read(lambda: claims.known_workflows(within))

    async def schema_version(self) -> int:
        """The newest migration applied to the database."""
        rows = await self.read(lambda: _rows(_sql.SCHEMA_VERSION))
        return int(rows[0][0] or 0) if rows else 0

    async def counts(self) -> Counts:
        """Unfinished runs by (queue, status) and live workers (see Store.counts)."""
        return await self.read(_counts)

    async def expire_workers(self, worker_ids: list[str]) -> None:
        """Mark workers dead now."""
        if worker_ids:
            await self.write(lambda: claims.expire_workers(worker_ids))

    async def release_run(
        self, run_id: str, lease: Lease, *, interrupted: Sequence[AttemptRecord] = ()
    ) -> bool:
        """Queue again a run whose attempt ended early (see Store.release_run)."""
        return await self.write(lambda: claims.release_run(run_id, lease, time.time(), interrupted))

    async def remove_worker(self, worker_id: str) -> None:
        """Delete the worker and hand its running runs back to PENDING."""
        await self.write(lambda: claims.remove_worker(worker_id, time.time()))

    async def claim_runs(
        self,
        worker_id: str,
        limit: int,
        *,
        now: float,
        stale: bool,
        queues: list[str] | None = None,
        workflows: list[str] | None = None,
        versions: dict[str, str] | None = None,
        orphans_first: bool = False,
        only: list[str] | None = None,
    ) -> Claimed:
        """Atomically take due and orphaned runs (see Store.claim_runs)."""
        if limit <= 0 or workflows == [] or queues == [] or only == []:
            return Claimed([], {})
        return await self.write(
            lambda: claims.claim_runs(
                worker_id, limit, now, stale, queues, workflows, versions, orphans_first, only
            )
        )

    async def claimable_runs(
        self, *, now: float, limit: int, stale: bool, workflows: list[str]
    ) -> list[tuple[str, str, str | None, float]]:
        """Runs a claim could take now (see claims.claimable)."""
        if not workflows:
            return []
        return await self.read(lambda: claims.claimable(now, limit, stale, workflows))

    async def next_wake(self) -> float | None:
        """The earliest wake time of a parked or delayed run, None if there is none."""
        rows = await self.read(lambda: _rows(_sql.NEXT_WAKE))
        times = [float(row[0]) for row in rows if row[0] is not None]
        return min(times) if times else None

    # queues

    async def declare_queue(self, queue: QueueRecord, *, declared: str, now: float) -> None:
        """Store a code declaration's limits when the declaration changed."""
        await self.write(lambda: claims.declare_queue(queue, declared, now))

    async def update_queue(self, queue: QueueRecord, *, now: float) -> None:
        """Set a queue's limits now (workers apply them at their next claim)."""
        await self.write(lambda: claims.update_queue(queue, now))

    async def list_queues(self) -> list[QueueRecord]:
        """Every queue with stored limits, by name."""
        return await self.read(claims.list_queues)

    # schedules

    async def create_schedule(self, schedule: ScheduleRecord) -> bool:
        """Insert a new schedule; False if its id is taken."""
        return await self.write(lambda: schedules.create_schedule(schedule))

    async def sync_schedule(self, schedule: ScheduleRecord) -> ScheduleRecord:
        """Insert a declared schedule or update the stored one (see Store.sync_schedule)."""
        return await self.write(lambda: schedules.sync_schedule(schedule))

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or None."""
        rows = await self.read(lambda: _rows(_sql.SELECT_SCHEDULE, (schedule_id,)))
        return _sql.schedule_from_row(rows[0]) if rows else None

    async def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule, by id."""
        rows = await self.read(lambda: _rows(_sql.SELECT_SCHEDULES))
        return [_sql.schedule_from_row(row) for row in rows]

    async def set_schedule_paused(
        self, schedule_id: str, *, paused: bool, next_tick: float | None, now: float
    ) -> ScheduleRecord | None:
        """Pause or resume a schedule; None if unknown."""
        return await self.write(
            lambda: schedules.set_schedule_paused(schedule_id, paused, next_tick, now)
        )

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete a schedule; False if unknown."""
        return await self.write(lambda: schedules.delete_schedule(schedule_id))

    async def due_schedules(self, now: float, limit: int) -> list[ScheduleRecord]:
        """Unpaused schedules with a tick due by `now` or a buffered tick."""
        rows = await self.read(lambda: _rows(_sql.SELECT_DUE_SCHEDULES, (now, limit)))
        return [_sql.schedule_from_row(row) for row in rows]

    async def next_schedule_tick(self) -> float | None:
        """The earliest next tick of an unpaused schedule, None if there is none."""
        rows = await self.read(lambda: _rows(_sql.NEXT_SCHEDULE_TICK))
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    async def fire_schedule(
        self,
        schedule_id: str,
        *,
        expected_next: float,
        new_next: float,
        ticks: Sequence[tuple[float, str]],
        now: float,
    ) -> Fired | None:
        """Advance a schedule by compare-and-set and fire its ticks (see Store.fire_schedule)."""
        return await self.write(
            lambda: schedules.fire_schedule(schedule_id, expected_next, new_next, ticks, now)
        )

    async def release_buffered(
        self, schedule_id: str, *, tick: float, run_id: str, now: float
    ) -> Fired | None:
        """Start a buffered tick whose blocking run has ended; None if not (yet)."""
        return await self.write(lambda: schedules.release_buffered(schedule_id, tick, run_id, now))

    async def trigger_schedule(
        self, schedule_id: str, *, run_id: str, now: float
    ) -> RunRecord | None:
        """Start one run of the schedule now; None if unknown."""
        return await self.write(lambda: schedules.trigger_schedule(schedule_id, run_id, now))

    # event triggers

    async def sync_subscriptions(
        self, workflows: Sequence[tuple[str, str | None, str | None, int]], *, now: float
    ) -> None:
        """Store the event types the given workflows subscribe to."""
        if workflows:
            await self.write(lambda: schedules.sync_subscriptions(workflows, now))

    async def list_subscriptions(self) -> list[Subscription]:
        """Every stored subscription."""
        return await self.read(schedules.list_subscriptions)

    async def emit_event(
        self,
        event_type: str,
        args: str,
        *,
        key: str | None,
        now: float,
        local: Sequence[Subscription] = (),
        lease: Lease | None = None,
        step: StepRecord | None = None,
        trace_context: str | None = None,
    ) -> list[str]:
        """Start the subscribers of `event_type` (see Store.emit_event)."""
        return await self.write(
            lambda: schedules.emit_event(
                event_type, args, key, now, local, lease, step, trace_context
            )
        )
