"""SqlStore's runs: their life, operator control and lineage, and retention."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.store import _sql
from cairn.store.programs import control, prune, runs
from cairn.store.records import (
    Lease,
    Lineage,
    Pruned,
    PruneQuery,
    RunQuery,
    RunRecord,
)
from cairn.store.sql_store.base import SqlBase, rows_of


class SqlRuns(SqlBase):
    """Runs, as programs of store/programs/runs.py, control.py and prune.py."""

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
        read = self.read_one_plan if _sql.one_plan_fits(query) else self.read
        return [_sql.run_from_row(row) for row in await read(lambda: rows_of(text, params))]

    async def count_runs(self, query: RunQuery, limit: int | None = None) -> dict[str, int]:
        """How many runs match `query` (its status aside), by status (see Store.count_runs)."""
        text, params = _sql.count_runs(query, limit)
        rows = await self.read(lambda: rows_of(text, params))
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

    async def control_run(self, run_id: str, action: str, *, now: float) -> str | None:
        """Apply cancel / pause / resume (see Store.control_run)."""
        return await self.write(lambda: control.control_run(run_id, action, now))

    async def controlled_runs(self, owner: str) -> list[tuple[str, str]]:
        """(run_id, control) of runs owned by `owner` with a pending request."""
        rows = await self.read(lambda: rows_of(_sql.SELECT_CONTROLLED, (owner,)))
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
