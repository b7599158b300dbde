"""Programs of worker rows: registration, heartbeats, expiry, removal, known workflows.

And a living worker's hand-back of one run (`release_run`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from cairn.store import _sql
from cairn.store.programs import orphans
from cairn.store.programs.base import Program, Sql, all_rows, one_row, operation, path, wakes
from cairn.store.records import AttemptRecord, Beat, Counts, Lease, WorkerRecord


@operation
@path("unknown")
def register_worker(worker: WorkerRecord) -> Program[None]:
    """Insert or refresh a worker row; its workflows are remembered as known now."""
    yield Sql(_sql.UPSERT_WORKER, _sql.worker_params(worker))
    yield from _remember(_names(worker.workflows), None)


@operation
def known_workflows(within: float) -> Program[set[str] | None]:
    """Read: the workflows that workers seen in the last `within` seconds said they execute.

    Seen by the database's clock: a worker's heartbeat, or when a worker now gone
    registered, stopped or was last heard of before it was found dead. None when a worker
    seen in that time does not say (it may execute any workflow).
    """
    known: set[str] = set()
    for (workflows,) in (yield all_rows(_sql.SELECT_RECENT_WORKER_WORKFLOWS, (within,))):
        if workflows is None:
            return None  # a worker that does not say may execute any workflow
        known.update(_names(workflows))
    rows = yield all_rows(_sql.SELECT_RECENT_WORKFLOWS, (within,))
    known.update(str(name) for (name,) in rows)
    return known


@operation
def declare_workflows(workflows: Sequence[tuple[str, str | None, int]]) -> Program[None]:
    """Store each `(workflow, queue, max_recoveries)` as the code of a worker declares it.

    Known from now on (by the database's clock), and what a run started by that name in
    a process without the code gets (`declared_workflow`). Callers skip an empty list.
    """
    for name, queue, max_recoveries in workflows:
        yield Sql(_sql.DECLARE_WORKFLOW, (name, queue, max_recoveries))


@operation
def declared_workflow(name: str) -> Program[tuple[str | None, int] | None]:
    """Read: the (queue, max_recoveries) workers declared for workflow `name`, or None."""
    rows = yield all_rows(_sql.SELECT_DECLARED_WORKFLOW, (name,))
    if not rows or rows[0][1] is None:
        return None
    queue, max_recoveries = rows[0]
    return (None if queue is None else str(queue), int(max_recoveries))


@operation
def version_served(workflow: str, version: str, me: str) -> Program[bool]:
    """Read: whether a live worker other than `me` may execute `version` of `workflow`.

    True for one that says it runs that version, and for one that does not say which
    versions it runs (an older cairn) but may execute the workflow.
    """
    for workflows, versions in (yield all_rows(_sql.SELECT_LIVE_OTHERS_CODE, (me,))):
        if workflows is not None and workflow not in _names(workflows):
            continue
        if versions is None:
            return True
        found = json.loads(versions)
        if isinstance(found, dict) and found.get(workflow) == version:
            return True
    return False


def _names(workflows: str | None) -> list[str]:
    """The names in a worker's `workflows` column (a JSON list; None says nothing)."""
    found = json.loads(workflows) if workflows else []
    return [str(name) for name in found] if isinstance(found, list) else []


def _remember(names: Sequence[str], seen_at: float | None) -> Program[None]:
    """Remember `names` as known at `seen_at` (None: the database's clock now)."""
    for start in range(0, len(names), _sql.REMEMBER_CHUNK):
        chunk = names[start : start + _sql.REMEMBER_CHUNK]
        if seen_at is None:
            yield Sql(_sql.remember_workflows(len(chunk)), chunk)
        else:
            params = [value for name in chunk for value in (name, seen_at)]
            yield Sql(_sql.remember_workflows(len(chunk), seen="?"), params)


def _remember_worker(worker_id: str, *, now: bool) -> Program[None]:
    """Remember what a worker about to go knew: as of now, or of its last heartbeat."""
    row = yield one_row(_sql.SELECT_WORKER_SEEN, (worker_id,))
    if row is None:
        return
    workflows, heartbeat_at = row
    if now:
        yield from _remember(_names(workflows), None)
    elif heartbeat_at:
        yield from _remember(_names(workflows), float(heartbeat_at))


@operation
def beat(
    worker: WorkerRecord,
    let_go: Sequence[tuple[str, int]] = (),
    stopped: Callable[[], bool] | None = None,
) -> Program[Beat]:
    """Mark `worker` alive now, by the database's clock; what it holds, every worker.

    The same write stores `worker.executing` (the steps it has in flight). A worker whose
    row is gone registers again. The runs in `let_go` (id, fence) that it still holds
    under that fence are queued again (PENDING, no owner) in the same transaction, and
    named in `Beat.released`: their work stopped making progress. A store's
    `side_channel()` does the same from a thread of its own (and wakes other workers for
    the runs it releases). Once `stopped()` (see `beat_at`), the beat writes nothing.
    """
    return (yield from beat_at(worker, let_go, time.time(), stopped))


def beat_at(
    worker: WorkerRecord,
    let_go: Sequence[tuple[str, int]] = (),
    now: float = 0.0,
    stopped: Callable[[], bool] | None = None,
) -> Program[Beat]:
    """Mark the worker alive (by the database's clock); what it holds, and every worker.

    A worker whose row is gone (removed while it was presumed dead) registers again. The
    runs in `let_go` (id, fence), still held under that fence, are queued again in the
    same transaction: alive is not enough to keep a run whose work makes no progress.

    `stopped()` turns True once the worker beats no more (any thread may ask it): its stop
    removes its row next, or failed to. A beat sent before that but begun only after (it
    waited for a lock, or for a server that did not answer) writes nothing, and one that
    finds the row gone does not register again: a late beat neither makes the stopped
    worker look alive (its version served, its runs held) for another lease nor puts back
    the row its stop removed. Asked again after the row is found gone, since the removal
    (which the worker begins only once `stopped()`) may have committed meanwhile.

    A claim of this worker's runs as orphans locks them, then this worker's row
    (orphans.still_orphaned), so the beat is serialized with it: either way round, the
    fence a worker reads once its beat has committed is the truth. The beat takes its
    locks in the same order (runs first) so that the two never deadlock. A worker whose
    row was gone has none for the claim to lock: its beat locks the runs it still owns
    instead (FOR SHARE), waiting for a claim that took them to commit first. It waits,
    never skips: a run it could not lock may be a claim's, not yet committed, and the
    worker would trust it. So it locks them by run_id, the order in which the end of a
    run locks the runs it writes (runs.lock_family): neither waits for a run ordered
    before one it holds, so the two never close a circle. A beat that also hands runs
    back locks them all (those among them) in that one pass, before its first write.
    """
    if stopped is not None and stopped():
        return Beat({}, [])
    released = []
    if let_go and (yield one_row(_sql.SELECT_WORKER_EXECUTING, (worker.worker_id,))) is None:
        yield Sql(_sql.SELECT_OWNED_IN_ORDER, (worker.worker_id,), "all", "hold")
    for run_id, fence in sorted(let_go):  # by run_id, as every lock of several runs
        if (yield Sql(_sql.RELEASE_ONE, (now, run_id, worker.worker_id, fence))):
            released.append(run_id)
    if (yield Sql(_sql.HEARTBEAT, (worker.executing, worker.worker_id))):
        owned = yield all_rows(_sql.SELECT_OWNED, (worker.worker_id,))
    elif stopped is not None and stopped():
        owned = []  # removed on stop: not to be put back
    else:
        yield Sql(_sql.UPSERT_WORKER, _sql.worker_params(worker))
        owned = yield Sql(_sql.SELECT_OWNED_IN_ORDER, (worker.worker_id,), "all", "share")
    workers = yield all_rows(_sql.SELECT_WORKERS)
    return Beat(
        {str(run_id): int(fence) for run_id, fence in owned},
        [_sql.worker_from_row(row) for row in workers],
        tuple(released),
    )


@operation
@wakes
def expire_workers(worker_ids: Sequence[str]) -> Program[None]:
    """Mark workers dead now, so their runs can be recovered without waiting for the lease.

    Callers skip an empty list (a transaction that writes nothing).
    """
    for worker_id in worker_ids:
        yield from _remember_worker(worker_id, now=False)
        yield Sql(_sql.EXPIRE_WORKER, (worker_id,))


@operation
@wakes
def remove_worker(worker_id: str) -> Program[None]:
    """Delete a worker row and release the runs it still owns back to PENDING.

    The runs are locked first, by run_id (the order of every lock of several runs, see
    runs.lock_family): the UPDATE alone would lock them in the order its plan reads them.
    """
    now = time.time()
    yield Sql(_sql.SELECT_OWNED_IN_ORDER, (worker_id,), "all", "hold")
    yield Sql(_sql.RELEASE_OWNED, (now, worker_id))
    yield from _remember_worker(worker_id, now=True)
    yield Sql(_sql.DELETE_WORKER, (worker_id,))


@operation
def list_workers() -> Program[list[WorkerRecord]]:
    """Read: every worker row."""
    rows = yield all_rows(_sql.SELECT_WORKERS)
    return [_sql.worker_from_row(row) for row in rows]


@operation
def get_worker(worker_id: str) -> Program[WorkerRecord | None]:
    """Read: the worker row, or None (a worker that stopped cleanly has none)."""
    rows = yield all_rows(_sql.SELECT_WORKER, (worker_id,))
    return _sql.worker_from_row(rows[0]) if rows else None


@operation
def counts() -> Program[Counts]:
    """Read: unfinished runs by (queue, status), and workers whose heartbeat is within their lease.

    A read of the unfinished runs and the workers table (for metrics at scrape time).
    Queues or statuses without runs are absent from `runs`. `spinning` counts the
    unfinished runs with more than SPINNING_AFTER futile wakes.
    """
    rows = yield Sql(_sql.COUNT_UNFINISHED, (), "all")
    (live,) = yield Sql(_sql.COUNT_LIVE_WORKERS, (), "one")
    by_status = {(queue, status): int(n) for queue, status, n, _ in rows}
    return Counts(by_status, int(live), sum(int(spinning or 0) for *_, spinning in rows))


@operation
def live_workers() -> Program[int]:
    """Read: how many workers' heartbeats are within their lease (the reader's included)."""
    (live,) = yield Sql(_sql.COUNT_LIVE_WORKERS, (), "one")
    return int(live)


@operation
def next_wake() -> Program[float | None]:
    """Read: the earliest `wake_at` of a SLEEPING, WAITING or delayed PENDING run, or None."""
    rows = yield all_rows(_sql.NEXT_WAKE)
    times = [float(row[0]) for row in rows if row[0] is not None]
    return min(times) if times else None


@operation
@wakes
def release_run(
    run_id: str,
    lease: Lease,
    *,
    interrupted: Sequence[AttemptRecord] = (),
    waiting_for: str | None = None,
    uncount: bool = False,
    now: float | None = None,
) -> Program[bool]:
    """Queue again a run `lease` holds but whose attempt ended early; True if it did.

    The run becomes PENDING with no owner (claimed again without counting a recovery), and
    the `interrupted` attempts (step attempts the ending cut short) are recorded in the
    same transaction, each unless its step's outcome is in the journal. A no-op (False)
    if `lease` no longer holds it. `waiting_for`, if given, says what it waits for until
    a claim takes it (a worker with the key it was handed back for). `uncount`: the
    attempt wrote nothing, so the run goes back as its claim found it: the attempt that
    claim counted is taken back (a recovery it counted stays: max_recoveries is about
    dead owners); or, if the claim woke it (the row says, however the attempt began),
    none was counted, and the run is parked again, WAITING and due at `now` (the
    caller's clock, as claims judge due runs by it; default the system's), its `attempt`
    still how many times it has executed (the next claim wakes it, no count).
    """
    at = time.time()
    if uncount:
        params: tuple[object, ...] = (at, waiting_for, at if now is None else now)
        text = _sql.RELEASE_IDLE_FOR
    else:
        params, text = (at, waiting_for), _sql.RELEASE_ONE_FOR
    if not (yield Sql(text, (*params, run_id, lease.owner, lease.fence))):
        return False
    yield from orphans.interrupted(interrupted)
    return True
