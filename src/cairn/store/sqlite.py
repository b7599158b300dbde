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
            params = (status, wake_at, waiting_for, now, run_id, owner)
            if not conn.execute(_sql.PARK_RUN, params).rowcount:
                raise LeaseLost(run_id)

        await self._write(op)

    async def update_run_meta(
        self, run_id: str, owner: str, *, columns: str | None, progress: str | None, now: float
    ) -> None:
        """Store columns and progress; column values are also indexed for filtering."""

        def op(conn: sqlite3.Connection) -> None:
            params = (columns, progress, now, run_id, owner)
            if not conn.execute(_sql.UPDATE_META, params).rowcount:
                raise LeaseLost(run_id)

        await self._write(op)

    async def set_columns(self, run_id: str, owner: str, values: dict[str, str]) -> None:
        """Index column values (name -> JSON text) for `list_runs(columns=...)`."""

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                _sql.INSERT_COLUMN, [(run_id, name, value) for name, value in values.items()]
            )

        await self._write(op)

    # journal

    async def load_journal(self, run_id: str) -> list[StepRecord]:
        """Every recorded outcome, in seq order."""
        return [_sql.step_from_row(row) for row in self._read(_sql.SELECT_JOURNAL, (run_id,))]

    async def record_step(self, owner: str, step: StepRecord) -> None:
        """Commit a step outcome for a run owned by `owner`."""

        def op(conn: sqlite3.Connection) -> None:
            if not conn.execute(_sql.TOUCH_OWNED, (step.finished_at, step.run_id, owner)).rowcount:
                raise LeaseLost(step.run_id)
            conn.execute(_sql.INSERT_STEP, _sql.step_params(step))

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


def _now_of(conn: sqlite3.Connection) -> float:
    row = conn.execute("SELECT (julianday('now') - 2440587.5) * 86400.0").fetchone()
    return float(row[0])


def _claim(
    conn: sqlite3.Connection, worker_id: str, limit: int, *, now: float, lease: float
) -> Claimed:
    claimed: list[str] = []
    poisoned: list[str] = []
    for run_id, status in conn.execute(_sql.SELECT_DUE, (now, limit)).fetchall():
        grow = 0 if status == "SLEEPING" else 1
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
