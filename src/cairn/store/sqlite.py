"""SqliteStore: the embedded backend (WAL, group commit on the event loop's thread).

Statements run synchronously on the event loop's thread: a WAL commit costs tens of
microseconds, less than handing work to another thread and back. Writes issued in the same
loop iteration share one transaction (group commit), and no writer is answered before its
transaction commits.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from cairn.errors import StoreError
from cairn.store import _sql, migrate
from cairn.store.protocol import LeaseLost
from cairn.store.records import (
    AttemptRecord,
    Claimed,
    RunQuery,
    RunRecord,
    StepRecord,
    TaskRecord,
    WorkerRecord,
)

T = TypeVar("T")
_Op = Callable[[sqlite3.Connection], Any]


class SqliteStore:
    """The Store protocol on one SQLite file (or `:memory:`)."""

    dialect = "sqlite"

    def __init__(self, path: str, *, synchronous: str = "NORMAL") -> None:
        self.path = path
        self._synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._pending: list[tuple[_Op, asyncio.Future[Any]]] = []
        self._flush_scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection; StoreError if the store is closed."""
        if self._conn is None:
            raise StoreError(f"store {self.path!r} is not open")
        return self._conn

    async def open(self) -> None:
        """Connect, switch to WAL and apply pending migrations."""
        if self._conn is not None:
            return
        self._loop = asyncio.get_running_loop()
        if self.path != ":memory:":
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise StoreError(f"cannot open database {self.path!r}: no folder {folder!r}")
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA temp_store=MEMORY")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path!r}: {exc}") from exc
        self._conn = conn
        self._migrate()

    def _migrate(self) -> None:
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(migrate.TABLE_SQL)
            applied = {row[0] for row in conn.execute("SELECT version FROM cairn_migrations")}
            for migration in migrate.pending("sqlite", applied, where=repr(self.path)):
                for statement in migrate.statements(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO cairn_migrations (version, name, applied_at) "
                    "VALUES (?, ?, julianday('now'))",
                    (migration.version, migration.name),
                )
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot migrate database {self.path!r}: {exc}") from exc
            raise

    async def close(self) -> None:
        """Flush pending writes and close the connection."""
        if self._pending:
            self._flush()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # group commit

    def _write(self, op: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = self._loop or asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((op, future))
        if not self._flush_scheduled and not _others_ready(loop):
            # Nobody else can add to this batch before the loop idles: commit now and
            # save the writer a trip around the event loop.
            self._flush()
            return future
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._flush_scheduled = False
        batch, self._pending = self._pending, []
        if not batch:
            return
        conn = self.conn
        try:
            outcomes = self._run_batch(conn, batch)
        except sqlite3.Error:
            # One bad write must not sink its neighbours: retry each in its own transaction.
            outcomes = []
            for item in batch:
                try:
                    outcomes.extend(self._run_batch(conn, [item]))
                except sqlite3.Error as exc:
                    outcomes.append(StoreError(f"database {self.path!r}: {exc}"))
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    def _run_batch(
        self, conn: sqlite3.Connection, batch: list[tuple[_Op, asyncio.Future[Any]]]
    ) -> list[Any]:
        outcomes: list[Any] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op, _ in batch:
                try:
                    outcomes.append(op(conn))
                except LeaseLost as exc:
                    outcomes.append(exc)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return outcomes

    def _read(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[Any]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"database {self.path!r}: {exc}") from exc

    # runs

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert `run` unless its run_id exists; returns the stored run and whether it is new."""

        def op(conn: sqlite3.Connection) -> RunRecord | None:
            if conn.execute(_sql.INSERT_RUN, _sql.run_params(run)).rowcount:
                return None
            row = conn.execute(_sql.SELECT_RUN, (run.run_id,)).fetchone()
            return _sql.run_from_row(row)

        existing = await self._write(op)
        return (run, True) if existing is None else (existing, False)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None."""
        rows = self._read(_sql.SELECT_RUN, (run_id,))
        return _sql.run_from_row(rows[0]) if rows else None

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        """Runs matching `query`, newest first."""
        sql, params = _sql.list_runs(query)
        return [_sql.run_from_row(row) for row in self._read(sql, params)]

    async def finish_run(
        self,
        run_id: str,
        owner: str,
        status: str,
        *,
        result: str | None,
        error: str | None,
        now: float,
    ) -> None:
        """End a run owned by `owner`."""

        def op(conn: sqlite3.Connection) -> None:
            params = (status, result, error, now, now, run_id, owner)
            if not conn.execute(_sql.FINISH_RUN, params).rowcount:
                raise LeaseLost(run_id)
            _after_finish(conn, run_id, status, result, error, now)

        await self._write(op)

    async def continue_run(self, run_id: str, owner: str, new_run: RunRecord, now: float) -> None:
        """End a run CONTINUED and create its successor, in one transaction."""

        def op(conn: sqlite3.Connection) -> None:
            params = (new_run.run_id, now, now, run_id, owner)
            if not conn.execute(_sql.CONTINUE_RUN, params).rowcount:
                raise LeaseLost(run_id)
            conn.execute(_sql.INSERT_RUN, _sql.run_params(new_run))
            # A parent waiting on this run learns the successor's id (in `result`).
            _after_finish(conn, run_id, "CONTINUED", new_run.run_id, None, now)

        await self._write(op)

    # operator control

    async def control_run(self, run_id: str, action: str, *, now: float) -> str | None:
        """Apply cancel / pause / resume to a run (see Store.control_run)."""

        def op(conn: sqlite3.Connection) -> str | None:
            return _control(conn, run_id, action, now)

        return await self._write(op)

    async def controlled_runs(self, owner: str) -> list[tuple[str, str]]:
        """(run_id, control) of runs owned by `owner` with a pending request."""
        return [(str(r), str(c)) for r, c in self._read(_sql.SELECT_CONTROLLED, (owner,))]

    async def retry_run(self, run_id: str, *, now: float) -> bool:
        """Requeue a FAILED run, forgetting its last failed step; False if not FAILED."""

        def op(conn: sqlite3.Connection) -> bool:
            last = conn.execute(_sql.LAST_STEP, (run_id,)).fetchone()
            if not conn.execute(_sql.REQUEUE_FAILED, (now, run_id)).rowcount:
                return False
            if last is not None and last[1] == "failed":
                conn.execute(_sql.DELETE_STEP, (run_id, last[0]))
                conn.execute(_sql.DELETE_ATTEMPTS, (run_id, last[0]))
            return True

        return await self._write(op)

    async def fork_run(self, new_run: RunRecord, source_id: str, before_seq: int) -> None:
        """Create `new_run` with a copy of the source's journal entries before `before_seq`."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(_sql.INSERT_RUN, _sql.run_params(new_run))
            conn.execute(_sql.COPY_STEPS, (new_run.run_id, source_id, before_seq))

        await self._write(op)

    async def park_run(
        self,
        run_id: str,
        owner: str,
        status: str,
        *,
        wake_at: float | None,
        waiting_for: str | None,
        now: float,
    ) -> None:
        """Park a run (SLEEPING/WAITING) and release it."""

        def op(conn: sqlite3.Connection) -> None:
            due = wake_at
            if status == "WAITING" and conn.execute(_sql.HAS_MESSAGES, (run_id,)).fetchone():
                due = now  # a message arrived while the run was deciding to wait
            params = (status, due, waiting_for, now, run_id, owner)
            if not conn.execute(_sql.PARK_RUN, params).rowcount:
                raise LeaseLost(run_id)

        await self._write(op)

    async def update_run_meta(
        self,
        run_id: str,
        *,
        columns: dict[str, str] | None,
        progress: str | None,
        now: float,
    ) -> None:
        """Store a run's columns (name -> JSON text, merged and indexed) and progress."""

        def op(conn: sqlite3.Connection) -> None:
            merged = None
            if columns:
                conn.executemany(
                    _sql.INSERT_COLUMN, [(run_id, name, value) for name, value in columns.items()]
                )
                rows = conn.execute(_sql.SELECT_COLUMNS, (run_id,)).fetchall()
                merged = _sql.columns_json(rows)
            conn.execute(_sql.UPDATE_META, (merged, progress, now, run_id))

        await self._write(op)

    # journal

    async def load_journal(self, run_id: str) -> list[StepRecord]:
        """Every recorded outcome, in seq order."""
        return [_sql.step_from_row(row) for row in self._read(_sql.SELECT_JOURNAL, (run_id,))]

    async def record_step(self, owner: str, step: StepRecord) -> None:
        """Commit a step outcome for a run owned by `owner`."""
        params = (*_sql.step_params(step), step.run_id, owner)

        def op(conn: sqlite3.Connection) -> None:
            if not conn.execute(_sql.INSERT_STEP_OWNED, params).rowcount:
                raise LeaseLost(step.run_id)

        await self._write(op)

    async def record_attempt(self, owner: str, attempt: AttemptRecord) -> None:
        """Commit a failed attempt."""

        def op(conn: sqlite3.Connection) -> None:
            touch = (attempt.failed_at, attempt.run_id, owner)
            if not conn.execute(_sql.TOUCH_OWNED, touch).rowcount:
                raise LeaseLost(attempt.run_id)
            conn.execute(_sql.INSERT_ATTEMPT, _sql.attempt_params(attempt))

        await self._write(op)

    async def load_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Every failed attempt of the run."""
        rows = self._read(_sql.SELECT_ATTEMPTS, (run_id,))
        return [_sql.attempt_from_row(row) for row in rows]

    async def upsert_step(self, owner: str, step: StepRecord) -> None:
        """Commit a journal entry that may replace a "waiting" one with the same key."""
        params = (*_sql.step_params(step), step.run_id, owner)

        def op(conn: sqlite3.Connection) -> None:
            if not conn.execute(_sql.UPSERT_STEP_OWNED, params).rowcount:
                raise LeaseLost(step.run_id)

        await self._write(op)

    # messages, hooks and tasks

    async def send_message(
        self, run_id: str, channel: str, payload: str, *, idempotency_key: str | None, now: float
    ) -> str | None:
        """Queue a message for a run and wake it if waiting.

        Returns the run's status (None if no such run). Finished runs get no message.
        """

        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(_sql.SELECT_STATUS, (run_id,)).fetchone()
            if row is None or row[0] in _FINISHED:
                return None if row is None else str(row[0])
            conn.execute(_sql.INSERT_MESSAGE, (run_id, channel, payload, idempotency_key, now))
            conn.execute(_sql.WAKE_WAITING, (now, run_id))
            return str(row[0])

        return await self._write(op)

    async def consume_message(self, owner: str, channel: str, step: StepRecord) -> str | None:
        """Take the oldest message on `channel` and record it as the outcome of `step`.

        Returns the payload, or None if there is none.
        """

        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(_sql.SELECT_OLDEST_MESSAGE, (step.run_id, channel)).fetchone()
            if row is None:
                return None
            message_id, payload = row
            params = (*_sql.step_params(step), step.run_id, owner)
            params = (*params[:9], payload, *params[10:])
            if not conn.execute(_sql.UPSERT_STEP_OWNED, params).rowcount:
                raise LeaseLost(step.run_id)
            conn.execute(_sql.CONSUME_MESSAGE, (step.key, message_id))
            return str(payload)

        return await self._write(op)

    async def create_hook(
        self, owner: str, step: StepRecord, *, token: str, name: str, expires_at: float | None
    ) -> None:
        """Record a hook's creation (journal entry and hook row) in one transaction."""
        params = (*_sql.step_params(step), step.run_id, owner)

        def op(conn: sqlite3.Connection) -> None:
            if not conn.execute(_sql.UPSERT_STEP_OWNED, params).rowcount:
                raise LeaseLost(step.run_id)
            hook = (token, step.run_id, name, step.started_at, expires_at)
            conn.execute(_sql.INSERT_HOOK, hook)

        await self._write(op)

    async def resume_hook(self, token: str, payload: str, *, now: float) -> str | None:
        """Use a hook once: queue `payload` for its run; None if unknown, used or expired."""

        def op(conn: sqlite3.Connection) -> str | None:
            if not conn.execute(_sql.USE_HOOK, (now, token, now)).rowcount:
                return None
            (run_id,) = conn.execute(_sql.SELECT_HOOK_RUN, (token,)).fetchone()
            conn.execute(_sql.INSERT_MESSAGE, (run_id, f"hook:{token}", payload, None, now))
            conn.execute(_sql.WAKE_WAITING, (now, run_id))
            return str(run_id)

        return await self._write(op)

    async def create_task(self, owner: str, step: StepRecord, task: TaskRecord) -> None:
        """Record a human task's creation (journal entry and task row) in one transaction."""
        params = (*_sql.step_params(step), step.run_id, owner)

        def op(conn: sqlite3.Connection) -> None:
            if not conn.execute(_sql.UPSERT_STEP_OWNED, params).rowcount:
                raise LeaseLost(step.run_id)
            conn.execute(_sql.INSERT_TASK, _sql.task_params(task))

        await self._write(op)

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        rows = self._read(_sql.SELECT_TASK, (task_id,))
        return _sql.task_from_row(rows[0]) if rows else None

    async def list_tasks(
        self, *, status: str | None, assignee: str | None, run_id: str | None = None
    ) -> list[TaskRecord]:
        """Tasks matching the filters, oldest first."""
        sql, params = _sql.list_tasks(status, assignee, run_id)
        return [_sql.task_from_row(row) for row in self._read(sql, params)]

    async def submit_task(
        self, task_id: str, values: str, *, by: str | None, now: float
    ) -> TaskRecord | None:
        """Mark an open task submitted and queue its values for the run; None if not open."""

        def op(conn: sqlite3.Connection) -> TaskRecord | None:
            if not conn.execute(_sql.SUBMIT_TASK, (now, by, values, task_id)).rowcount:
                return None
            task = _sql.task_from_row(conn.execute(_sql.SELECT_TASK, (task_id,)).fetchone())
            conn.execute(_sql.INSERT_MESSAGE, (task.run_id, f"task:{task_id}", values, None, now))
            conn.execute(_sql.WAKE_WAITING, (now, task.run_id))
            return task

        return await self._write(op)

    async def close_tasks(self, run_id: str, status: str, task_id: str | None = None) -> None:
        """Give a run's open tasks (or just `task_id`) a final status."""
        params = (status, run_id, task_id, task_id)
        await self._write(lambda conn: conn.execute(_sql.CLOSE_TASKS, params))

    # workers and claims

    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or refresh a worker row."""
        await self._write(lambda conn: conn.execute(_sql.UPSERT_WORKER, _sql.worker_params(worker)))

    async def heartbeat(self, worker_id: str, now: float) -> None:
        """Mark the worker alive."""
        await self._write(lambda conn: conn.execute(_sql.HEARTBEAT, (now, worker_id)))

    async def list_workers(self) -> list[WorkerRecord]:
        """Every worker row."""
        return [_sql.worker_from_row(row) for row in self._read(_sql.SELECT_WORKERS)]

    async def expire_workers(self, worker_ids: list[str]) -> None:
        """Mark workers dead now."""
        if worker_ids:
            params = [(w,) for w in worker_ids]
            await self._write(lambda conn: conn.executemany(_sql.EXPIRE_WORKER, params))

    async def remove_worker(self, worker_id: str) -> None:
        """Delete the worker and hand its running runs back to PENDING."""

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(_sql.RELEASE_OWNED, (_now_of(conn), worker_id))
            conn.execute(_sql.DELETE_WORKER, (worker_id,))

        await self._write(op)

    async def claim_runs(self, worker_id: str, limit: int, *, now: float, lease: float) -> Claimed:
        """Atomically take due and orphaned runs (see Store.claim_runs)."""

        def op(conn: sqlite3.Connection) -> Claimed:
            return _claim(conn, worker_id, limit, now=now, lease=lease)

        if limit <= 0:
            return Claimed([], [])
        return await self._write(op)

    async def claim_run(self, run_id: str, worker_id: str, *, now: float) -> RunRecord | None:
        """Take one PENDING run by id."""

        def op(conn: sqlite3.Connection) -> RunRecord | None:
            params = (worker_id, 1, 0, now, now, run_id, "PENDING")
            if not conn.execute(_sql.CLAIM_ONE, params).rowcount:
                return None
            return _sql.run_from_row(conn.execute(_sql.SELECT_RUN, (run_id,)).fetchone())

        return await self._write(op)


def _after_finish(
    conn: sqlite3.Connection,
    run_id: str,
    status: str,
    result: str | None,
    error: str | None,
    now: float,
) -> None:
    # Tell a waiting parent, and cancel this run's own unfinished attached children.
    row = conn.execute(_sql.SELECT_PARENT, (run_id,)).fetchone()
    if row is not None and row[0] is not None:
        message = _sql.child_message(run_id, status, result, error)
        conn.execute(_sql.INSERT_MESSAGE, (row[0], f"child:{run_id}", message, None, now))
        conn.execute(_sql.WAKE_WAITING, (now, row[0]))
    conn.execute(_sql.CANCEL_CHILDREN, (now, now, run_id))


def _control(conn: sqlite3.Connection, run_id: str, action: str, now: float) -> str | None:
    row = conn.execute(_sql.SELECT_CONTROL_STATE, (run_id,)).fetchone()
    if row is None:
        return None
    status, attempt, _owner = row
    if status in _FINISHED:
        return str(status)
    if action == "cancel":
        if status in ("PENDING", "PAUSED") and attempt == 0:
            conn.execute(_sql.CANCEL_UNSTARTED, (now, now, run_id))
            _after_finish(conn, run_id, "CANCELLED", None, None, now)
            return "CANCELLED"
        if status in ("SLEEPING", "WAITING", "PENDING", "PAUSED"):
            conn.execute(_sql.SET_CONTROL_AND_WAKE, ("cancel", now, now, run_id))
            if status == "PAUSED":
                conn.execute(_sql.RESUME_PAUSED, (now, now, run_id))
                conn.execute(_sql.SET_CONTROL, ("cancel", now, run_id))
            return str(status)
        conn.execute(_sql.SET_CONTROL, ("cancel", now, run_id))
        return str(status)
    if action == "pause":
        if status in ("SLEEPING", "WAITING", "PENDING"):
            conn.execute(_sql.PAUSE_PARKED, (now, run_id))
            return "PAUSED"
        if status == "RUNNING":
            conn.execute(_sql.SET_CONTROL, ("pause", now, run_id))
        return str(status)
    if action == "resume":
        if status == "PAUSED":
            conn.execute(_sql.RESUME_PAUSED, (now, now, run_id))
            return "PENDING" if attempt == 0 else "WAITING"
        if status == "RUNNING":
            conn.execute(_sql.SET_CONTROL, (None, now, run_id))
        return str(status)
    raise ValueError(f"unknown control action {action!r}")


_FINISHED = frozenset({"COMPLETED", "FAILED", "CANCELLED", "CONTINUED"})


def _others_ready(loop: asyncio.AbstractEventLoop) -> bool:
    """True if other callbacks are queued to run in this loop iteration.

    Reads the stock event loop's ready queue; on loops without one (uvloop), assume yes,
    which keeps group commit and costs one loop iteration per write.
    """
    ready = getattr(loop, "_ready", None)
    return ready is None or len(ready) > 0


def _now_of(conn: sqlite3.Connection) -> float:
    row = conn.execute("SELECT (julianday('now') - 2440587.5) * 86400.0").fetchone()
    return float(row[0])


def _claim(
    conn: sqlite3.Connection, worker_id: str, limit: int, *, now: float, lease: float
) -> Claimed:
    claimed: list[str] = []
    poisoned: list[str] = []
    due = conn.execute(_sql.SELECT_WOKEN, (now, limit)).fetchall()
    due += conn.execute(_sql.SELECT_PENDING, (now, limit - len(due))).fetchall()
    for run_id, status in due:
        grow = 1 if status == "PENDING" else 0
        if conn.execute(_sql.CLAIM_ONE, (worker_id, grow, 0, now, now, run_id, status)).rowcount:
            claimed.append(run_id)
    room = limit - len(claimed)
    if room > 0:
        orphans = conn.execute(_sql.SELECT_ORPHANED, (now - lease, room)).fetchall()
        for run_id, recoveries, max_recoveries in orphans:
            if recoveries >= max_recoveries:
                conn.execute(
                    _sql.POISON_ONE, (_sql.poison_error(run_id, recoveries), now, now, run_id)
                )
                poisoned.append(run_id)
            elif conn.execute(
                _sql.CLAIM_ONE, (worker_id, 1, 1, now, now, run_id, "RUNNING")
            ).rowcount:
                claimed.append(run_id)
    runs = [
        _sql.run_from_row(conn.execute(_sql.SELECT_RUN, (run_id,)).fetchone()) for run_id in claimed
    ]
    return Claimed(runs, poisoned)
