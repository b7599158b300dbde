"""The one storage interface every backend implements.

Writes that the engine acknowledges to a workflow (a step outcome, a finished run) are
committed before the call returns. Backends may share one commit among concurrent callers.
"""

from __future__ import annotations

from typing import Protocol

from cairn.store.records import (
    AttemptRecord,
    Claimed,
    RunQuery,
    RunRecord,
    StepRecord,
    WorkerRecord,
)


class LeaseLost(Exception):
    """The run is no longer owned by this worker; the write was not applied."""


class Store(Protocol):
    """Persistence for runs, their journals, and the workers that execute them."""

    dialect: str

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises SchemaTooNew for a newer schema."""
        ...

    async def close(self) -> None:
        """Flush pending writes and disconnect."""
        ...

    # runs

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert `run` unless its run_id exists; returns the stored run and whether it is new."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None when no run has that id."""
        ...

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        """Runs matching `query`, newest first, at most `query.limit` of them."""
        ...

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
        """End a run owned by `owner` and release it. Raises LeaseLost if not owned."""
        ...

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
        """Park a run owned by `owner` as SLEEPING or WAITING and release it.

        It becomes claimable again at `wake_at`. Raises LeaseLost if not owned.
        """
        ...

    async def update_run_meta(
        self, run_id: str, owner: str, *, columns: str | None, progress: str | None, now: float
    ) -> None:
        """Store a run's columns and progress (JSON text; None leaves a field unchanged)."""
        ...

    # journal

    async def load_journal(self, run_id: str) -> list[StepRecord]:
        """Every recorded outcome of the run, in seq order."""
        ...

    async def record_step(self, owner: str, step: StepRecord) -> None:
        """Commit a step outcome for a run owned by `owner`. Raises LeaseLost if not owned."""
        ...

    async def record_attempt(self, owner: str, attempt: AttemptRecord) -> None:
        """Commit a failed attempt of a step. Raises LeaseLost if not owned."""
        ...

    async def load_attempts(self, run_id: str) -> list[AttemptRecord]:
        """Every failed attempt recorded for the run, by key then attempt."""
        ...

    # workers and claims

    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or refresh a worker row."""
        ...

    async def heartbeat(self, worker_id: str, now: float) -> None:
        """Mark the worker alive at `now`."""
        ...

    async def list_workers(self) -> list[WorkerRecord]:
        """Every worker row."""
        ...

    async def expire_workers(self, worker_ids: list[str]) -> None:
        """Mark workers dead now, so their runs can be recovered without waiting for the lease."""
        ...

    async def remove_worker(self, worker_id: str) -> None:
        """Delete a worker row and release the runs it still owns back to PENDING."""
        ...

    async def claim_runs(self, worker_id: str, limit: int, *, now: float, lease: float) -> Claimed:
        """Atomically take up to `limit` runs to execute.

        Candidates are PENDING runs that are due and RUNNING runs whose owner's heartbeat
        is older than `lease` (recoveries). Claimed runs become RUNNING, owned by
        `worker_id`, with `attempt` incremented; a recovered run past its max_recoveries is
        ended FAILED instead and reported in `poisoned`. A run is never handed to two workers.
        """
        ...

    async def claim_run(self, run_id: str, worker_id: str, *, now: float) -> RunRecord | None:
        """Take one PENDING run by id (the in-process fast path); None if another worker has it."""
        ...
