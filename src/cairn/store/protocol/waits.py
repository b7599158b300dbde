"""The waits part of the Store protocol: messages, hooks and human tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cairn.store.records import (
    Delivery,
    HookRecord,
    Lease,
    StepRecord,
    TaskRecord,
)


class WaitStore(Protocol):
    """What waiting runs consume: messages, hooks and human tasks."""

    async def send_message(
        self, run_id: str, channel: str, payload: str, *, idempotency_key: str | None, now: float
    ) -> Delivery | None:
        """Queue `payload` on the run's `channel`; wake the run if one of its waits takes it.

        A WAITING run whose waits take the channel (see park_run's `waits_on`) is made due
        now. Returns the run's status, whether it was woken and what its waits consume; None
        when no run has that id. A finished run gets no message (its status is returned).
        A repeated (run, channel, idempotency_key) is stored once.
        """
        ...

    async def consume_message(self, lease: Lease, channel: str, step: StepRecord) -> str | None:
        """Atomically take the oldest unconsumed message on `channel` of `step.run_id`.

        `step` is upserted with the payload as its result. Returns None (nothing written)
        if none is queued; raises LeaseLost if not held.
        """
        ...

    async def consume_messages(
        self,
        lease: Lease,
        channel: str,
        step: StepRecord,
        *,
        limit: int,
        combine: Callable[[list[str]], str],
    ) -> str | None:
        """Atomically take the `limit` oldest unconsumed messages on `channel` of the run.

        `step` is upserted with `combine(payloads)` (oldest first) as its result, and that
        text is returned. Returns None (nothing written) if none is queued; raises
        LeaseLost if not held.
        """
        ...

    async def create_hook(self, lease: Lease, step: StepRecord, hook: HookRecord) -> None:
        """Upsert the hook's journal entry and insert its row, in one transaction.

        A row with the same token already there is kept as it is (a replayed creation).
        Raises LeaseLost if not held.
        """
        ...

    async def get_hook(self, token: str) -> HookRecord | None:
        """The hook stored under `token` (as stored: the digest), used or not; None if none."""
        ...

    async def resume_hook(self, token: str, payload: str, *, now: float) -> str | None:
        """Mark the hook used and queue `payload` on channel `hook:TOKEN` of its run.

        Returns the run id; None (nothing written) if the token is unknown, used or expired,
        or its run has finished.
        """
        ...

    async def list_hooks(
        self, *, now: float, run_id: str | None = None, limit: int = 100
    ) -> list[HookRecord]:
        """Hooks that can still be called at `now`, oldest first, at most `limit`.

        That is: unused, not expired, and their run not finished; only `run_id`'s if
        given. Their `token` is the stored digest, which resumes nothing.
        """
        ...

    async def create_task(self, lease: Lease, step: StepRecord, task: TaskRecord) -> None:
        """Upsert the task's journal entry and insert its row, in one transaction."""
        ...

    async def get_task(self, task_id: str) -> TaskRecord | None:
        """The task, or None."""
        ...

    async def list_tasks(
        self,
        *,
        status: str | None,
        assignee: str | None,
        run_id: str | None = None,
        descendants: bool = False,
    ) -> list[TaskRecord]:
        """Tasks matching every given filter, oldest first.

        With `descendants`, `run_id` keeps the tasks of that run and of the runs below it
        (its children, theirs, ... at most `_sql.TREE_DEPTH` generations down).
        """
        ...

    async def submit_task(
        self, task_id: str, values: str, *, by: str | None, now: float
    ) -> TaskRecord | None:
        """Mark an open task submitted (by, when, values) and queue the values for its run.

        The values go on channel `task:ID`. Returns None (nothing written) if not open.
        """
        ...

    async def close_tasks(self, run_id: str, status: str, task_id: str | None = None) -> None:
        """Give the run's open tasks (or only `task_id`) a final `status`."""
        ...
