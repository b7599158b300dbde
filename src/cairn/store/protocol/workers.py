"""The workers part of the Store protocol: registration, beats, claims and queues."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cairn.store.records import (
    AttemptRecord,
    Beat,
    Claimed,
    Counts,
    Lease,
    QueueRecord,
    WorkerRecord,
)


class SideChannel(Protocol):
    """A connection of its own, for one thread: heartbeats that go on when the loop is busy.

    Every method blocks the calling thread (never an event loop) and may raise StoreError.
    """

    def beat(self, worker: WorkerRecord, let_go: Sequence[tuple[str, int]] = ()) -> Beat:
        """Heartbeat `worker` by the database's clock (see `Store.beat`)."""
        ...

    def close(self) -> None:
        """Disconnect."""
        ...


class WorkerStore(Protocol):
    """Workers, their heartbeats, claiming runs and queue limits."""

    async def register_worker(self, worker: WorkerRecord) -> None:
        """Insert or refresh a worker row; its times are the database's clock."""
        ...

    async def beat(self, worker: WorkerRecord, let_go: Sequence[tuple[str, int]] = ()) -> Beat:
        """Mark `worker` alive now, by the database's clock; what it holds, every worker.

        The same write stores `worker.executing` (the steps it has in flight). A worker
        whose row is gone registers again. The runs in `let_go` (id, fence) that it still
        holds under that fence are queued again (PENDING, no owner) in the same
        transaction, and named in `Beat.released`: their work stopped making progress.
        `side_channel()` does the same from a thread of its own (and wakes other workers
        for the runs it releases).
        """
        ...

    async def list_workers(self) -> list[WorkerRecord]:
        """Every worker row."""
        ...

    async def get_worker(self, worker_id: str) -> WorkerRecord | None:
        """The worker row, or None (a worker that stopped cleanly has none)."""
        ...

    async def known_workflows(self, within: float) -> set[str] | None:
        """The workflows that workers seen in the last `within` seconds said they execute.

        Seen by the database's clock: a worker's heartbeat, or when a worker now gone
        registered, stopped or was last heard of before it was found dead. None when a
        worker seen in that time does not say (it may execute any workflow).
        """
        ...

    async def counts(self) -> Counts:
        """Unfinished runs by (queue, status), and workers whose heartbeat is within their lease.

        A read of the unfinished runs and the workers table (for metrics at scrape time).
        Queues or statuses without runs are absent from `runs`. `spinning` counts the
        unfinished runs with more than SPINNING_AFTER futile wakes.
        """
        ...

    async def expire_workers(self, worker_ids: list[str]) -> None:
        """Mark workers dead now, so their runs can be recovered without waiting for the lease."""
        ...

    async def release_run(
        self, run_id: str, lease: Lease, *, interrupted: Sequence[AttemptRecord] = ()
    ) -> bool:
        """Queue again a run `lease` holds but whose attempt ended early; True if it did.

        The run becomes PENDING with no owner (claimed again without counting a
        recovery), and the `interrupted` attempts (step attempts the ending cut short)
        are recorded in the same transaction, each unless its step's outcome is in the
        journal. A no-op (False) if `lease` no longer holds it.
        """
        ...

    async def remove_worker(self, worker_id: str) -> None:
        """Delete a worker row and release the runs it still owns back to PENDING."""
        ...

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
        """Atomically take up to `limit` runs to execute (only of the run ids `only`, if given).

        Only runs of `workflows` are taken when it is given (a worker takes only what its
        code can execute). A queued run without a version gets `versions[workflow]` (the
        version of the code that first executes it).

        Candidates are parked runs now due, PENDING runs that are due, and RUNNING runs
        whose owner is dead (recoveries): it has no worker row or was expired, or (only
        with `stale`) its heartbeat is older than its own lease by the database's clock.
        Each kind alike is taken only if it is of `queues` (when given) and its queue's
        limits let it in (see programs/queues.py LIMITS: which limit holds which kind).
        Orphans come after pending runs, unless `orphans_first` (a worker asks that now
        and then, so that a backlog of new runs never keeps a dead worker's runs waiting).
        Claimed runs become RUNNING, owned by `worker_id`, with their fence bumped;
        `attempt` grows for a start or recovery, not for a wake-up.
        A recovered run past its max_recoveries is ended FAILED instead and reported in
        `poisoned` (run id -> workflow). Either way, each step the dead owner's last
        heartbeat listed in flight for the run (under its fence) is recorded as an
        attempt with outcome "interrupted", unless its outcome or that attempt's failure
        is already recorded. A run held back by a limit gets
        `waiting_for` naming it. A run is never handed to two workers.
        """
        ...

    async def claimable_runs(
        self, *, now: float, limit: int, stale: bool, workflows: list[str]
    ) -> list[tuple[str, str, str | None, float]]:
        """Up to `limit` runs of each kind `claim_runs` could take now.

        Each as (run id, status, queue, mark): the mark changes when the run comes back
        in another state (a wake time, an orphan's fence). Read only: a transport
        publishes these ids for its consumers to claim (the claim decides, with the queue
        limits). Orphans count as `claim_runs` judges them with `stale`.
        """
        ...

    async def next_wake(self) -> float | None:
        """The earliest `wake_at` of a SLEEPING, WAITING or delayed PENDING run, or None."""
        ...

    # queues

    async def declare_queue(self, queue: QueueRecord, *, declared: str, now: float) -> None:
        """Store a code declaration's limits, unless the same declaration is stored.

        An operator's live change therefore stays until the code's declaration changes.
        """
        ...

    async def update_queue(self, queue: QueueRecord, *, now: float) -> None:
        """Set a queue's limits (creating the queue row if needed)."""
        ...

    async def list_queues(self) -> list[QueueRecord]:
        """Every queue with stored limits, by name."""
        ...
