"""The programs of step queues: attempts a run sends to the workers serving a queue.

A run inserts an attempt (fenced by its lease) and parks; a worker of the queue claims
it under a lease judged by the database's clock and renews it while the step runs; the
holder of the latest claim reports the outcome, in the same transaction, as a message on
the run's channel for that attempt (which wakes the run). An attempt whose worker went
silent past its lease is claimed again by another worker of the queue.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from cairn.store import _sql
from cairn.store.programs import journal, waits
from cairn.store.programs.base import Program, Sql, all_rows, one_row, operation
from cairn.store.protocol import LeaseLost
from cairn.store.records import STEP_TASK_FIELDS, AttemptRecord, Lease, StepTaskRecord

COLUMNS = ", ".join(STEP_TASK_FIELDS)

# Params: the task's values, then run_id, owner, fence of the run's lease.
INSERT_OWNED = (
    f"INSERT INTO step_tasks ({COLUMNS}) "
    f"SELECT {', '.join('?' * len(STEP_TASK_FIELDS))} "
    f"WHERE EXISTS (SELECT 1 FROM runs WHERE {_sql.FENCE}) ON CONFLICT (task_id) DO NOTHING"
)
SELECT_ONE = f"SELECT {COLUMNS} FROM step_tasks WHERE task_id = ?"
SELECT_OF_RUN = f"SELECT {COLUMNS} FROM step_tasks WHERE run_id = ? ORDER BY created_at, task_id"


def _claimable(queues: int, only: bool = False, skip: int = 0) -> str:
    """Queued attempts, and taken ones whose worker went silent, of runs not over yet.

    Of `queues` (that many placeholders; none: of every queue), and with `only` of the
    one task id given first; without the `skip` task ids given next.
    """
    where = f"queue IN ({', '.join('?' * queues)}) AND " if queues else ""
    if skip:
        where = f"task_id NOT IN ({', '.join('?' * skip)}) AND {where}"
    if only:
        where = f"task_id = ? AND {where}"
    return (
        f"SELECT {COLUMNS} FROM step_tasks WHERE {where}"
        f"(status = 'queued' OR (status = 'running' AND lease_until < {_sql.DB_NOW})) "
        "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.run_id = step_tasks.run_id "
        f"AND runs.status IN {_sql.FINISHED_SQL}) ORDER BY created_at LIMIT ?"
    )


# Params: worker_id, lease seconds, the interrupted claims, task_id, the claims count seen.
TAKE = (
    "UPDATE step_tasks SET status = 'running', worker_id = ?, claims = claims + 1, "
    f"lease_until = {_sql.DB_NOW} + ?, started_at = {_sql.DB_NOW}, interrupted = ? "
    "WHERE task_id = ? AND claims = ? AND status IN ('queued', 'running')"
)
# The interrupted claims an attempt keeps (the oldest go past this): a bound on the row.
KEPT_INTERRUPTIONS = 20
# Params: lease seconds, task_id, claims.
RENEW = (
    f"UPDATE step_tasks SET lease_until = {_sql.DB_NOW} + ? "
    "WHERE task_id = ? AND claims = ? AND status = 'running' "
    "AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.run_id = step_tasks.run_id "
    f"AND runs.status IN {_sql.FINISHED_SQL})"
)
# Params: status, finished_at, task_id, claims. The input is not kept once it is done.
CLOSE = (
    "UPDATE step_tasks SET status = ?, finished_at = ?, input = NULL "
    "WHERE task_id = ? AND claims = ? AND status = 'running'"
)
# The run ended (params: finished_at, run_id): its attempts still open end with it, none
# claimable again (a retried run sends its own). "lost": the claim's worker let its lease
# run out (killed, say) and no worker took the attempt over; "dropped": any other.
END_WITH_RUN = (
    "UPDATE step_tasks SET status = CASE WHEN status = 'running' AND lease_until < "
    f"{_sql.DB_NOW} THEN 'lost' ELSE 'dropped' END, finished_at = ?, input = NULL "
    "WHERE run_id = ? AND status IN ('queued', 'running')"
)
# A worker stopping hands an attempt back for any worker of the queue to take at once
# (params: task_id, claims).
RELEASE = (
    "UPDATE step_tasks SET status = 'queued', worker_id = NULL, lease_until = NULL "
    "WHERE task_id = ? AND claims = ? AND status = 'running'"
)


def from_row(row: Sequence[Any]) -> StepTaskRecord:
    """A StepTaskRecord from a row of COLUMNS."""
    return StepTaskRecord(*row)


@operation
def enqueue(lease: Lease, task: StepTaskRecord) -> Program[None]:
    """Insert an attempt for its step queue's workers (once: again, nothing).

    Raises LeaseLost if the run is not held by `lease`.
    """
    params = (*(getattr(task, name) for name in STEP_TASK_FIELDS), task.run_id, lease.owner)
    if (yield Sql(INSERT_OWNED, (*params, lease.fence))):
        return
    if (yield one_row(SELECT_ONE, (task.task_id,))) is None:
        raise LeaseLost(task.run_id)


@operation
def claim(
    queues: Sequence[str],
    worker_id: str,
    *,
    lease: float,
    limit: int,
    only: str | None = None,
    skip: Sequence[str] = (),
) -> Program[list[StepTaskRecord]]:
    """Take up to `limit` attempts on `queues` for `worker_id` (only task `only`, if given).

    Never the task ids in `skip` (attempts this worker handed back for a key it lacks).

    Queued ones, and those whose worker let its lease (seconds, on the database's clock)
    run out; never those of a finished run.
    """
    queues = list(queues)
    if not queues:
        return []  # (no placeholders would mean every queue)
    text = _claimable(len(queues), only is not None, len(skip))
    params = (*(() if only is None else (only,)), *skip, *queues, limit)
    rows = yield all_rows(text, params, lock=True)
    taken = []
    for row in rows:
        task = from_row(row)
        lost = interrupted_by_takeover(task)
        if (yield Sql(TAKE, (worker_id, lease, lost, task.task_id, task.claims))):
            taken.append(
                StepTaskRecord(
                    **{
                        **{name: getattr(task, name) for name in STEP_TASK_FIELDS},
                        "status": "running",
                        "worker_id": worker_id,
                        "claims": task.claims + 1,
                        "interrupted": lost,
                    }
                )
            )
    return taken


def interrupted_by_takeover(task: StepTaskRecord) -> str | None:
    """`task.interrupted` once its claim is taken over: with that claim if it ran.

    A running attempt is claimable only once its worker let the lease run out (it died or
    lost the database): that claim was interrupted. A queued one (new, or handed back by
    a stopping worker) interrupted nothing.
    """
    if task.status != "running" or task.worker_id is None:
        return task.interrupted
    claims = json.loads(task.interrupted) if task.interrupted else []
    claims.append(
        {"worker": task.worker_id, "started_at": task.started_at, "lease_until": task.lease_until}
    )
    return json.dumps(claims[-KEPT_INTERRUPTIONS:])


@operation
def claimable(*, limit: int) -> Program[list[tuple[str, str, int]]]:
    """Read: (task id, queue, claims) of up to `limit` attempts claimable now."""
    rows = yield all_rows(_claimable(0), (limit,))
    return [(task.task_id, task.queue, task.claims) for task in map(from_row, rows)]


@operation
def report(task: StepTaskRecord, channel: str, payload: str, *, now: float) -> Program[bool]:
    """Close the attempt held by this claim and send its outcome to the run, at once.

    False (nothing written) if the claim is no longer the latest (another worker took the
    attempt over) or the run is over.
    """
    if not (yield Sql(CLOSE, ("done", now, task.task_id, task.claims))):
        return False
    delivery = yield from waits.send_message(
        task.run_id, channel, payload, idempotency_key=task.task_id, now=now
    )
    return delivery is not None


@operation
def renew(task: StepTaskRecord, *, lease: float) -> Program[bool]:
    """Extend this claim's lease; False if another claim took it or its run is over."""
    return bool((yield Sql(RENEW, (lease, task.task_id, task.claims))))


@operation
def drop(task: StepTaskRecord, *, now: float) -> Program[None]:
    """Close an attempt held by this claim without an outcome (its run is over)."""
    yield Sql(CLOSE, ("dropped", now, task.task_id, task.claims))


def end_with_run(run_id: str, now: float) -> Program[None]:
    """Close the attempts of run `run_id` still queued or held: it ended (END_WITH_RUN).

    A worker still executing one stops it at its next lease renewal, as before.
    """
    yield Sql(END_WITH_RUN, (now, run_id))


@operation
def release(task: StepTaskRecord) -> Program[None]:
    """Hand an attempt held by this claim back to its queue (its worker stops)."""
    yield Sql(RELEASE, (task.task_id, task.claims))


@operation
def record_cut_off(lease: Lease, attempt: AttemptRecord, task_id: str) -> Program[bool]:
    """Record `attempt` (ended cancelled) if a worker holds step attempt `task_id`.

    It takes that claim's worker and start. False (nothing written) for an attempt still
    queued or already closed. Raises LeaseLost if the run is not held by `lease`.
    """
    row = yield one_row(SELECT_ONE, (task_id,))
    task = None if row is None else from_row(row)
    if task is None or task.status != "running":
        return False
    started = attempt.started_at if task.started_at is None else task.started_at
    held = dataclasses.replace(attempt, started_at=started, worker=task.worker_id)
    yield from journal.record_attempt(lease, held)
    return True


@operation
def of_run(run_id: str) -> Program[list[StepTaskRecord]]:
    """Read: the run's attempts sent to step queues, oldest first."""
    rows = yield all_rows(SELECT_OF_RUN, (run_id,))
    return [from_row(row) for row in rows]
