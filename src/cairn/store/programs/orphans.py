"""Orphans: an owner judged dead again under lock, and what it had in flight.

Parts of a claim's takeover of a dead owner's runs (programs/claims.py): the owner judged
again, the relatives of a run it ends locked without waiting, the attempts cut short
(also of a run handed back early).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.store import _sql, in_flight
from cairn.store.programs.base import Program, Sql, one_row
from cairn.store.records import AttemptRecord


def still_orphaned(rows: list[Any], *, stale: bool) -> Program[list[Any]]:
    """The candidate orphans (locked) whose owner is still dead, judged again now.

    The candidates' read judged each owner in a snapshot that may predate a heartbeat
    committed since. So the owners' rows are read again, after the runs are locked, with
    a lock of their own (PostgreSQL's FOR SHARE, which waits for a heartbeat under way and
    then reads it), and the owner's next heartbeat waits for this transaction: either the
    heartbeat commits first and is seen here, or this claim commits first and the owner's
    fence check after its heartbeat sees the run gone. An owner with no row has nothing
    to lock: the heartbeat that registers it again locks its runs instead
    (programs/workers.py `beat_at`). SQLite's write transaction is exclusive: the read
    only repeats what the candidates' read saw.
    """
    owners = sorted({str(row[4]) for row in rows if row[4] is not None})
    if not owners:
        return rows
    judged = yield Sql(_sql.owners_alive(len(owners), stale=stale), owners, "all", "share")
    alive = {str(worker_id) for worker_id, live in judged if live}
    return [row for row in rows if row[4] is None or str(row[4]) not in alive]


def relatives_held(run_id: str) -> Program[bool]:
    """Lock the runs the end of orphan `run_id` writes (its parent, its children); True if all.

    A claim that ends a run recovered too often (PoisonRun) writes its parent and its
    unfinished children too, after it has locked the run and its owner's row. Waiting
    for them then could close a circle with a heartbeat (programs/workers.py `beat_at`)
    that holds one (handing it back, or re-registering: its owned runs FOR SHARE) and
    waits for the owner's row or for the run: so they are locked only if nobody holds
    them (SKIP LOCKED), and if one is held the run is left for a later claim. SQLite's
    write transaction is exclusive: all are held.
    """
    params = (run_id, run_id)
    every = yield Sql(_sql.SELECT_RELATIVES, params, "all")
    if not every:
        return True
    held = yield Sql(_sql.SELECT_RELATIVES, params, "all", "try")
    return len(held) == len(every)


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
    yield from interrupted(
        [
            in_flight.interrupted(step, execution=execution, worker=owner, now=now, why=why)
            for step in steps
        ]
    )


def interrupted(attempts: Sequence[AttemptRecord]) -> Program[None]:
    """Insert interrupted attempts, each unless its step's outcome is in the journal."""
    for attempt in attempts:
        params = (*_sql.attempt_params(attempt), attempt.run_id, attempt.key)
        yield Sql(_sql.INSERT_INTERRUPTED, params)
