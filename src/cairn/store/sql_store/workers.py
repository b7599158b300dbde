"""SqlStore's workers, claims and queues (see store/programs: claims.py, workers.py, queues.py)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from cairn.store import _sql
from cairn.store.programs import claims, queues, workers
from cairn.store.programs.base import Program, Sql
from cairn.store.records import (
    AttemptRecord,
    Beat,
    Claimed,
    Counts,
    Lease,
    QueueRecord,
    WorkerRecord,
)
from cairn.store.sql_store.base import SqlBase, rows_of


def _counts() -> Program[Counts]:
    rows = yield Sql(_sql.COUNT_UNFINISHED, (), "all")
    (workers,) = yield Sql(_sql.COUNT_LIVE_WORKERS, (), "one")
    by_status = {(queue, status): int(n) for queue, status, n, _ in rows}
    return Counts(by_status, int(workers), sum(int(spinning or 0) for *_, spinning in rows))


class SqlWorkers(SqlBase):
    """Workers, their heartbeats, claiming runs and queue limits."""

    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or refresh a worker row."""
        await self.write(lambda: workers.register_worker(worker))

    async def beat(self, worker: WorkerRecord, let_go: Sequence[tuple[str, int]] = ()) -> Beat:
        """Mark the worker alive by the database's clock; what it holds, every worker."""
        return await self.write(lambda: workers.beat(worker, let_go, time.time()))

    async def list_workers(self) -> list[WorkerRecord]:
        """Every worker row."""
        return [
            _sql.worker_from_row(row)
            for row in await self.read(lambda: rows_of(_sql.SELECT_WORKERS))
        ]

    async def get_worker(self, worker_id: str) -> WorkerRecord | None:
        """The worker row, or None."""
        rows = await self.read(lambda: rows_of(_sql.SELECT_WORKER, (worker_id,)))
        return _sql.worker_from_row(rows[0]) if rows else None

    async def known_workflows(self, within: float) -> set[str] | None:
        """Workflows known to workers seen in the last `within` seconds (see Store)."""
        return await self.read(lambda: workers.known_workflows(within))

    async def counts(self) -> Counts:
        """Unfinished runs by (queue, status) and live workers (see Store.counts)."""
        return await self.read(_counts)

    async def expire_workers(self, worker_ids: list[str]) -> None:
        """Mark workers dead now."""
        if worker_ids:
            await self.write(lambda: workers.expire_workers(worker_ids))

    async def release_run(
        self, run_id: str, lease: Lease, *, interrupted: Sequence[AttemptRecord] = ()
    ) -> bool:
        """Queue again a run whose attempt ended early (see Store.release_run)."""
        return await self.write(lambda: claims.release_run(run_id, lease, time.time(), interrupted))

    async def remove_worker(self, worker_id: str) -> None:
        """Delete the worker and hand its running runs back to PENDING."""
        await self.write(lambda: workers.remove_worker(worker_id, time.time()))

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
        rows = await self.read(lambda: rows_of(_sql.NEXT_WAKE))
        times = [float(row[0]) for row in rows if row[0] is not None]
        return min(times) if times else None

    # queues

    async def declare_queue(self, queue: QueueRecord, *, declared: str, now: float) -> None:
        """Store a code declaration's limits when the declaration changed."""
        await self.write(lambda: queues.declare_queue(queue, declared, now))

    async def update_queue(self, queue: QueueRecord, *, now: float) -> None:
        """Set a queue's limits now (workers apply them at their next claim)."""
        await self.write(lambda: queues.update_queue(queue, now))

    async def list_queues(self) -> list[QueueRecord]:
        """Every queue with stored limits, by name."""
        return await self.read(queues.list_queues)
