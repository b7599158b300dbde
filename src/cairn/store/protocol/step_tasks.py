"""The step queues part of the Store protocol: steps run elsewhere."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cairn.store.records import (
    Lease,
    StepTaskRecord,
)


class StepTaskStore(Protocol):
    """Step tasks: steps queued for workers elsewhere."""

    async def enqueue_step_task(self, lease: Lease, task: StepTaskRecord) -> None:
        """Insert an attempt for its step queue's workers (once: again, nothing).

        Raises LeaseLost if the run is not held by `lease`.
        """
        ...

    async def claim_step_tasks(
        self,
        queues: Sequence[str],
        worker_id: str,
        *,
        lease: float,
        limit: int,
        only: str | None = None,
    ) -> list[StepTaskRecord]:
        """Take up to `limit` attempts on `queues` (only task `only`, if given).

        Queued ones, and those whose worker let its lease (seconds, on the database's
        clock) run out; never those of a finished run.
        """
        ...

    async def claimable_step_tasks(self, *, limit: int) -> list[tuple[str, str, int]]:
        """(task id, queue, claims) of up to `limit` attempts claimable now (read only)."""
        ...

    async def renew_step_task(self, task: StepTaskRecord, *, lease: float) -> bool:
        """Extend this claim's lease; False if another claim took it or its run is over."""
        ...

    async def report_step_task(
        self, task: StepTaskRecord, channel: str, payload: str, *, now: float
    ) -> bool:
        """Close the attempt and queue `payload` on the run's `channel` in one transaction.

        False (nothing written) if this claim is no longer the latest.
        """
        ...

    async def drop_step_task(self, task: StepTaskRecord, *, now: float) -> None:
        """Close an attempt held by this claim without an outcome (its run is over)."""
        ...

    async def release_step_task(self, task: StepTaskRecord) -> None:
        """Hand an attempt held by this claim back to its queue (its worker stops)."""
        ...

    async def list_step_tasks(self, run_id: str) -> list[StepTaskRecord]:
        """The run's attempts sent to step queues, oldest first."""
        ...
