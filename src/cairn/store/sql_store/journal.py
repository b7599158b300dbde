"""SqlStore's journal: step outcomes and attempts."""

from __future__ import annotations

from typing import Any

from cairn.store import _sql
from cairn.store.programs import journal
from cairn.store.records import (
    AttemptRecord,
    Lease,
    StepRecord,
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
