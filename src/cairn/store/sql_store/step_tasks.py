"""SqlStore's step queues (see store/programs/step_tasks.py)."""

from __future__ import annotations

from collections.abc import Sequence

from cairn.store.programs import step_tasks
from cairn.store.records import (
    Lease,
    StepTaskRecord,
)
from cairn.store.sql_store.base import SqlBase, count_of, rows_of


class SqlStepTasks(SqlBase):
    """Step tasks: steps queued for workers elsewhere."""

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
        return bool(await self.write(lambda: count_of(step_tasks.RENEW, params)))

    async def report_step_task(
        self, task: StepTaskRecord, channel: str, payload: str, *, now: float
    ) -> bool:
        """Close the attempt and send its outcome to the run (see step_tasks.report)."""
        return await self.write(lambda: step_tasks.report(task, channel, payload, now))

    async def drop_step_task(self, task: StepTaskRecord, *, now: float) -> None:
        """Close an attempt whose run ended while it executed (no outcome is sent)."""
        params = ("dropped", now, task.task_id, task.claims)
        await self.write(lambda: count_of(step_tasks.CLOSE, params))

    async def release_step_task(self, task: StepTaskRecord) -> None:
        """Hand an attempt held by this claim back to its queue, for any worker to take."""
        params = (task.task_id, task.claims)
        await self.write(lambda: count_of(step_tasks.RELEASE, params))

    async def list_step_tasks(self, run_id: str) -> list[StepTaskRecord]:
        """The run's attempts sent to step queues, oldest first."""
        rows = await self.read(lambda: rows_of(step_tasks.SELECT_OF_RUN, (run_id,)))
        return [step_tasks.from_row(row) for row in rows]
