"""SqlStore's journal and waits: step outcomes, attempts, messages, hooks, tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.store import _sql
from cairn.store.programs import journal
from cairn.store.records import (
    AttemptRecord,
    Delivery,
    HookRecord,
    Lease,
    StepRecord,
    TaskRecord,
)
from cairn.store.sql_store.base import SqlBase, rows_of


class SqlJournal(SqlBase):
    """A run's journal and what its waits consume (store/programs/journal.py)."""

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
        rows = await self.read(lambda: rows_of(text, params))
        return [_sql.step_from_row(row) for row in rows]

    async def journal_extent(self, run_id: str) -> tuple[int, int]:
        """How many journal entries the run has, and its highest seq."""
        rows = await self.read(lambda: rows_of(_sql.JOURNAL_EXTENT, (run_id,)))
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
        rows = await self.read(lambda: rows_of(_sql.SELECT_ATTEMPTS, (run_id,)))
        return [_sql.attempt_from_row(row) for row in rows]

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
        rows = await self.read(lambda: rows_of(_sql.SELECT_HOOK, (token,)))
        return _sql.hook_from_row(rows[0]) if rows else None

    async def list_hooks(
        self, *, now: float, run_id: str | None = None, limit: int = 100
    ) -> list[HookRecord]:
        """Hooks that can still be called, oldest first."""
        params = (now, run_id, run_id, limit)
        rows = await self.read(lambda: rows_of(_sql.SELECT_OPEN_HOOKS, params))
        return [_sql.hook_from_row(row) for row in rows]

    async def resume_hook(self, token: str, payload: str, *, now: float) -> str | None:
        """Use a hook once; the run id, None if unknown, used or expired."""
        return await self.write(lambda: journal.resume_hook(token, payload, now))

    async def create_task(self, lease: Lease, step: StepRecord, task: TaskRecord) -> None:
        """Journal a human task's creation and insert its row."""
        await self.write(lambda: journal.create_task(lease, step, task))

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        rows = await self.read(lambda: rows_of(_sql.SELECT_TASK, (task_id,)))
        return _sql.task_from_row(rows[0]) if rows else None

    async def list_tasks(
        self,
        *,
        status: str | None,
        assignee: str | None,
        run_id: str | None = None,
        descendants: bool = False,
    ) -> list[TaskRecord]:
        """Tasks matching the filters, oldest first."""
        text, params = _sql.list_tasks(status, assignee, run_id, descendants)
        return [_sql.task_from_row(row) for row in await self.read(lambda: rows_of(text, params))]

    async def submit_task(
        self, task_id: str, values: str, *, by: str | None, now: float
    ) -> TaskRecord | None:
        """Submit an open task; None if it is not open."""
        return await self.write(lambda: journal.submit_task(task_id, values, by, now))

    async def close_tasks(self, run_id: str, status: str, task_id: str | None = None) -> None:
        """Give a run's open tasks (or just `task_id`) a final status."""
        await self.write(lambda: rows_of(_sql.CLOSE_TASKS, (status, run_id, task_id, task_id)))
