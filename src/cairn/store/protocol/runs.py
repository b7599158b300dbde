"""The runs part of the Store protocol: create, read, finish, park, control, prune."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cairn.store.records import (
    Lease,
    Lineage,
    Pruned,
    PruneQuery,
    RunQuery,
    RunRecord,
)


class RunStore(Protocol):
    """Runs: their life, operator control, lineage and retention."""

    async def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Insert `run` unless its run_id exists; returns the stored run and whether it is new."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None when no run has that id."""
        ...

    async def list_runs(self, query: RunQuery) -> list[RunRecord]:
        """Runs matching `query`, newest first, at most `query.limit` of them."""
        ...

    async def count_runs(self, query: RunQuery, limit: int | None = None) -> dict[str, int]:
        """How many runs match `query`'s filters, by status, in one read.

        `query.status`, `cursor` and `limit` are ignored; statuses without runs are absent.
        With `limit` and no filter, each status is counted up to `limit` (a count equal
        to `limit` is then a lower bound, the others are exact): a read bounded by `limit`
        whatever the size of the table. With `limit` and filters, counting stops after
        that many matching runs in all (in no particular order): counts that add up to
        `limit` are then lower bounds.
        """
        ...

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
        """End a run held by `lease` and release it. Raises LeaseLost if not held.

        In the same transaction: a parent run gets a message on channel `child:RUN_ID`
        (and is woken), the run's unfinished attached children are asked to cancel, and
        its open human tasks become "cancelled".
        """
        ...

    async def continue_run(self, run_id: str, lease: Lease, new_run: RunRecord, now: float) -> None:
        """End a run as CONTINUED and create its successor, in one transaction.

        `continued_to` of the old run names `new_run`, and the events queued for the old
        run that none of its waits took are queued for `new_run` instead. Raises
        LeaseLost if not held.
        """
        ...

    async def control_run(self, run_id: str, action: str, *, now: float) -> str | None:
        """Apply "cancel", "pause" or "resume" in one transaction; returns the status after.

        A never-started run is cancelled at once; a parked run is paused at once, or made
        due so it replays into the cancellation; an executing run gets `control` set for
        its worker to act on. None if no run has that id; a finished run is unchanged.
        """
        ...

    async def controlled_runs(self, owner: str) -> list[tuple[str, str]]:
        """(run_id, control) of the runs `owner` (a worker id) holds with a pending request."""
        ...

    async def retry_run(self, run_id: str, *, now: float, by: str | None = None) -> bool:
        """Requeue a FAILED run as PENDING, as its next execution, from the failed step.

        In one transaction: `runs.execution` grows by one and an ExecutionRecord (cause
        "retry", `by`, `now`) says so; a failed last journal entry moves to the retried
        entries (see `load_lineage`), so that its step runs again. Attempts are kept: each
        carries its execution. False (nothing written) if the run is not FAILED.
        """
        ...

    async def copy_run(
        self,
        new_run: RunRecord,
        source_id: str,
        *,
        before_seq: int | None,
        by: str | None = None,
        now: float,
    ) -> None:
        """Create `new_run`, a restart (`before_seq` None) or fork of run `source_id`.

        A fork copies the source's journal entries with seq < `before_seq` that are not
        "waiting". `new_run` carries its `restarted_from` / `forked_from`; an
        ExecutionRecord for its first execution (cause "restart" or "fork", `by`, `now`)
        is written in the same transaction.
        """
        ...

    async def load_lineage(self, run_id: str) -> Lineage:
        """What a run's audit trail adds to its journal.

        Its ExecutionRecords (by number), the entries retries took out of its journal (by
        execution, then seq), and the runs restarted or forked from it (oldest first).
        """
        ...

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
        """Park a run held by `lease` as SLEEPING or WAITING and release it.

        It becomes claimable again at `wake_at`. A WAITING run's `waits_on` are the
        channels its open waits consume: a message on one of them makes it claimable at
        once (one already queued too), a message on any other channel does not. None:
        any message does (what runs parked before waits_on existed get). `futile_wakes`
        is stored for people to see (see RunRecord). Raises LeaseLost if not held.
        """
        ...

    async def update_run_meta(
        self,
        run_id: str,
        *,
        columns: dict[str, str] | None,
        progress: str | None,
        now: float,
    ) -> None:
        """Merge indexed columns (name -> JSON text) and set progress (JSON text).

        None leaves a field unchanged; an unknown run is left alone (nothing is written).
        """
        ...

    async def prune_runs(
        self,
        query: PruneQuery,
        *,
        after: tuple[float, str] | None = None,
        limit: int = 500,
        dry_run: bool = False,
    ) -> Pruned:
        """Delete one batch of finished runs past retention, in one short transaction.

        Looks at the next `limit` runs with a status in `query.statuses` (default: every
        finished one) that finished before `query.finished_before`, oldest finished
        first, after `after` (`Pruned.after` of the previous batch). Each is deleted with
        every row it owns (history, attempts, messages, hooks, tasks, columns,
        executions), unless an unfinished run depends on it: an unfinished parent, an
        unfinished child, or an unfinished later run of its continue_as_new chain.
        `dry_run` deletes nothing and counts what it would delete (a read).
        """
        ...
