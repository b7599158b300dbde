"""Programs of claims (see `programs` for what a program is).

A claim takes due, queued and orphaned runs in one transaction, honouring each queue's
limits (`queues.QueueGate`) and ending runs recovered too often (PoisonRun).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.models import RunStatus
from cairn.store import _sql, in_flight
from cairn.store.programs.base import Program, Sql, all_rows, one_row, wakes
from cairn.store.programs.queues import QueueGate
from cairn.store.programs.runs import after_finish
from cairn.store.records import AttemptRecord, Claimed, Lease


@wakes
def release_run(
    run_id: str, lease: Lease, now: float, interrupted: Sequence[AttemptRecord] = ()
) -> Program[bool]:
    """Queue again a run `lease` still holds, for any worker (this one too) to claim.

    The attempts its step attempts in flight were cut short as are `interrupted`.
    """
    if not (yield Sql(_sql.RELEASE_ONE, (now, run_id, lease.owner, lease.fence))):
        return False
    yield from _interrupted(interrupted)
    return True


def claim_runs(
    worker_id: str,
    limit: int,
    now: float,
    stale: bool,
    queues: list[str] | None = None,
    workflows: list[str] | None = None,
    versions: dict[str, str] | None = None,
    orphans_first: bool = False,
    only: list[str] | None = None,
) -> Program[Claimed]:
    """Take due runs, then pending and orphaned ones (see Store.claim_runs).

    `only`: of these run ids alone (a transport's message names the run to take).

    Pending runs of a queue are taken only while the queue's limits allow; a run held back
    gets `waiting_for` saying which limit holds it.
    """
    claimed: list[str] = []
    poisoned: dict[str, str] = {}
    due_at: dict[str, float] = {}
    # A worker only takes runs of workflows it can execute (None: it knows them all).
    known = (*(only or ()), *(workflows or ()))
    woken = _only(_sql.restrict(_sql.SELECT_WOKEN, "workflow", workflows), only)
    due = yield all_rows(woken, (*known, now, limit), lock=True)
    by_status: dict[str, list[str]] = {}
    for run_id, status, _ in due:
        by_status.setdefault(str(status), []).append(str(run_id))
    took: set[str] = set()
    for status, run_ids in by_status.items():
        # A waking sleeper is the same attempt going on, so its attempt does not grow.
        took |= yield from _claim_all(worker_id, run_ids, status, 0, now)
    for run_id, _, wake_at in due:
        if str(run_id) in took:
            claimed.append(str(run_id))
            due_at[str(run_id)] = float(wake_at)
    if orphans_first:
        yield from _claim_orphans(
            worker_id, limit, stale, known, workflows, claimed, poisoned, now, only
        )
    if len(claimed) < limit:
        # Over-fetch: some candidates may be held back by their queue's limits.
        want = (limit - len(claimed)) * 4
        text = _only(
            _sql.restrict(
                _sql.restrict(_sql.SELECT_PENDING, "queue", queues), "workflow", workflows
            ),
            only,
        )
        pending = yield all_rows(text, (*known, *(queues or ()), now, want), lock=True)
        gate = QueueGate(worker_id, now)
        # In candidate order: (run id, whether claimed, or None for an unqueued run, which
        # no limit holds back: those are claimed together below, in one statement).
        chosen: list[tuple[str, bool | None]] = []
        since_of: dict[str, float] = {}
        workflow_of: dict[str, str] = {}
        room = limit - len(claimed)
        for run_id, _status, queue, partition, waiting_for, workflow, since in pending:
            if room <= 0:
                break
            run_id = str(run_id)
            since_of[run_id], workflow_of[run_id] = float(since), str(workflow)
            if queue is None:
                chosen.append((run_id, None))
                room -= 1
                continue
            held = yield from gate.held(queue, partition)
            if held is not None:
                if held != waiting_for:
                    yield Sql(_sql.SET_WAITING_FOR, (held, run_id))
                continue
            claim = (worker_id, 1, 0, now, now, now, run_id, RunStatus.PENDING)
            took_it = bool((yield Sql(_sql.CLAIM_ONE, claim)))
            chosen.append((run_id, took_it))
            if took_it:
                room -= 1
                gate.took(queue, partition)
        free = [run_id for run_id, took_it in chosen if took_it is None]
        took = yield from _claim_all(worker_id, free, RunStatus.PENDING, 1, now)
        started = [r for r, took_it in chosen if took_it or (took_it is None and r in took)]
        claimed.extend(started)
        due_at.update((run_id, since_of[run_id]) for run_id in started)
        yield from _set_versions(started, workflow_of, versions or {})
    if not orphans_first:
        yield from _claim_orphans(
            worker_id, limit, stale, known, workflows, claimed, poisoned, now, only
        )
    rows: dict[str, Any] = {}
    for chunk in _chunks(claimed):
        for row in (yield all_rows(_sql.for_runs(_sql.SELECT_RUN, len(chunk)), chunk)):
            rows[str(row[0])] = row
    runs = [_sql.run_from_row(rows[run_id]) for run_id in claimed]
    return Claimed(runs, poisoned, due_at)


# Ids per statement when claiming or reading many runs at once (well under both databases'
# limits on parameters).
_CHUNK = 500


def _chunks(run_ids: list[str]) -> list[list[str]]:
    return [run_ids[i : i + _CHUNK] for i in range(0, len(run_ids), _CHUNK)]


def _claim_all(
    worker_id: str, run_ids: list[str], status: str, attempts: int, now: float
) -> Program[set[str]]:
    """Claim `run_ids` (of `status`, locked by this transaction); the ids claimed.

    `attempts`: 1 for a run starting (or starting again), 0 for a sleeper waking.
    """
    took: set[str] = set()
    for chunk in _chunks(run_ids):
        params = (worker_id, attempts, 0, now, now, now, *chunk, status)
        rows = yield all_rows(_sql.claim_many(len(chunk)), params)
        took.update(str(row[0]) for row in rows)
    return took


def _set_versions(
    run_ids: list[str], workflow_of: dict[str, str], versions: dict[str, str]
) -> Program[None]:
    """Give runs without a version the version of their workflow's code here."""
    by_version: dict[str, list[str]] = {}
    for run_id in run_ids:
        version = versions.get(workflow_of[run_id])
        if version is not None:
            by_version.setdefault(version, []).append(run_id)
    for version, ids in by_version.items():
        for chunk in _chunks(ids):
            yield Sql(_sql.for_runs(_sql.SET_VERSION, len(chunk)), (version, *chunk))


def _claim_orphans(
    worker_id: str,
    limit: int,
    stale: bool,
    known: tuple[str, ...],
    workflows: list[str] | None,
    claimed: list[str],
    poisoned: dict[str, str],
    now: float,
    only: list[str] | None = None,
) -> Program[None]:
    """Take RUNNING runs whose owner is dead, while `claimed` has room (see claim_runs)."""
    room = limit - len(claimed)
    if room > 0:
        text = _sql.SELECT_ORPHANED if stale else _sql.SELECT_ORPHANED_DEAD
        orphaned = _only(_sql.restrict(text, "workflow", workflows), only)
        orphans = yield all_rows(orphaned, (*known, worker_id, room), lock=True)
        for run_id, recoveries, max_recoveries, workflow, owner, fence, execution in orphans:
            if recoveries >= max_recoveries:
                error = _sql.poison_error(run_id, recoveries)
                yield Sql(_sql.POISON_ONE, (error, now, now, run_id))
                yield from after_finish(run_id, RunStatus.FAILED, None, error, now)
                poisoned[run_id] = str(workflow)
            else:
                again = (worker_id, 1, 1, now, now, now, run_id, RunStatus.RUNNING)
                if not (yield Sql(_sql.CLAIM_ONE, again)):
                    continue
                claimed.append(run_id)
            yield from record_interrupted(run_id, owner, int(fence), int(execution), now)


def _only(sql: str, run_ids: list[str] | None) -> str:
    """`sql` narrowed to `run_ids` (their placeholders come first; None: unchanged)."""
    if run_ids is None:
        return sql
    marks = ", ".join("?" * len(run_ids))
    return sql.replace("WHERE ", f"WHERE run_id IN ({marks}) AND ", 1)


_DUE = (
    "SELECT run_id, status, queue, COALESCE(wake_at, created_at) FROM runs WHERE "
    "((status IN ('SLEEPING', 'WAITING') AND wake_at <= ?) "
    "OR (status = 'PENDING' AND (wake_at IS NULL OR wake_at <= ?))) "
    "ORDER BY COALESCE(wake_at, created_at) LIMIT ?"
)


def claimable(
    now: float, limit: int, stale: bool, workflows: list[str]
) -> Program[list[tuple[str, str, str | None, float]]]:
    """Runs a claim could take now (read only): due, pending and orphaned ones.

    Each as (run id, status, queue, mark): the mark changes when the run comes back in
    another state (its wake time; an orphan's fence). What a transport publishes (see
    cairn.celery): the claim its message leads to decides, with the queue limits and the
    liveness rules of `claim_runs`.
    """
    known = tuple(workflows)
    due = _sql.restrict(_DUE, "workflow", workflows)
    found = [
        (r[0], r[1], r[2], float(r[3])) for r in (yield all_rows(due, (*known, now, now, limit)))
    ]
    orphaned = _sql.restrict(
        _sql.SELECT_ORPHANED if stale else _sql.SELECT_ORPHANED_DEAD, "workflow", workflows
    ).replace(
        "SELECT run_id, recoveries, max_recoveries, workflow, owner, fence, execution",
        "SELECT run_id, queue, fence",
        1,
    )
    for run_id, queue, fence in (yield all_rows(orphaned, (*known, "", limit))):
        found.append((run_id, RunStatus.RUNNING, queue, float(fence)))
    return found


def record_interrupted(
    run_id: str, owner: str | None, fence: int, execution: int, now: float
) -> Program[None]:
    """Record each step `owner` had in flight for the run as an interrupted attempt.

    Called as the run is taken from `owner` (dead, or silent past its lease). What the
    owner had in flight is what its last heartbeat said (store/in_flight.py); a step whose
    outcome or failure was committed after all is left alone.
    """
    if owner is None:
        return
    row = yield one_row(_sql.SELECT_WORKER_EXECUTING, (owner,))
    steps = in_flight.decode(None if row is None else row[0], run_id, fence)
    why = "stopped (it died or lost the run)"
    yield from _interrupted(
        [
            in_flight.interrupted(step, execution=execution, worker=owner, now=now, why=why)
            for step in steps
        ]
    )


def _interrupted(attempts: Sequence[AttemptRecord]) -> Program[None]:
    """Insert interrupted attempts, each unless its step's outcome is in the journal."""
    for attempt in attempts:
        params = (*_sql.attempt_params(attempt), attempt.run_id, attempt.key)
        yield Sql(_sql.INSERT_INTERRUPTED, params)
