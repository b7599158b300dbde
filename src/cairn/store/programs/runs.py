"""Programs of a run's life: create, read, finish (telling its parent), continue, park."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cairn.errors import DuplicateRun
from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs import step_tasks
from cairn.store.programs.base import (
    Fenced,
    Path,
    Program,
    Sql,
    all_rows,
    fenced,
    lone,
    one_plan,
    one_row,
    operation,
    path,
    single_write,
    wakes,
    wakes_after,
)
from cairn.store.protocol import LeaseLost
from cairn.store.records import Lease, RunQuery, RunRecord


def _without_dedup_key(run: RunRecord, /) -> bool:
    # Its first statement is then the INSERT; an id that exists inserts nothing, and the
    # program goes on to read the existing run.
    return run.dedup_key is None


def _claimable_if_new(created: tuple[RunRecord, bool], run: RunRecord, /) -> float | None:
    # A new PENDING run is claimable at its wake time.
    return (run.wake_at or 0.0) if created[1] and run.status == RunStatus.PENDING else None


@operation
@single_write  # its only statements are those of inserted_or_existing
@lone(_without_dedup_key)
@wakes_after(_claimable_if_new)
def create_run(run: RunRecord, /) -> Program[tuple[RunRecord, bool]]:
    """Insert `run` unless its run_id exists; returns the stored run and whether it is new.

    Raises DuplicateRun (before writing) if an active run of the queue holds its dedup key.
    (PostgreSQL runs its own way of this, see PostgresStore.)
    """
    existing = yield from inserted_or_existing(run)
    return (run, True) if existing is None else (existing, False)


def inserted_or_existing(run: RunRecord) -> Program[RunRecord | None]:
    """Insert `run` unless its id exists; returns the existing run, or None if inserted.

    Raises DuplicateRun (before writing) if an active run of the queue holds its dedup key.
    """
    if run.dedup_key is None:
        # The common case in one statement: insert unless the id exists.
        if (yield Sql(_sql.INSERT_RUN, _sql.run_params(run))):
            return None
        return _sql.run_from_row((yield one_row(_sql.SELECT_RUN, (run.run_id,))))
    row = yield one_row(_sql.SELECT_RUN, (run.run_id,))
    if row is not None:
        return _sql.run_from_row(row)
    if run.dedup_key is not None:
        holder = yield one_row(_sql.SELECT_ACTIVE_DEDUP, (run.queue or "", run.dedup_key))
        if holder is not None:
            where = f" in queue {run.queue!r}" if run.queue else ""
            raise DuplicateRun(
                f"dedup key {run.dedup_key!r}{where} is held by active run {holder[0]!r}",
                run_id=str(holder[0]),
                dedup_key=run.dedup_key,
            )
    if (yield Sql(_sql.INSERT_RUN, _sql.run_params(run))):
        return None
    row = yield one_row(_sql.SELECT_RUN, (run.run_id,))
    return _sql.run_from_row(row)


@operation
def get_run(run_id: str, /) -> Program[RunRecord | None]:
    """Read: the run, or None when no run has that id."""
    row = yield one_row(_sql.SELECT_RUN, (run_id,))
    return None if row is None else _sql.run_from_row(row)


def _finish_path(
    run_id: str,
    lease: Lease,
    status: str,
    *,
    result: str | None,
    error: str | None,
    now: float,
    alone: bool = False,
) -> Path:
    # Alone, one statement and nobody to wake; else a parent may be woken with the commit.
    return ("one", None) if alone else ("unknown", 0.0)


def _finish_alone(*args: Any, alone: bool = False, **kwargs: Any) -> bool:
    return alone  # its program is then _finish_owned: one statement


@operation
@path(_finish_path)
@single_write(when=_finish_alone)
def finish_run(
    run_id: str,
    lease: Lease,
    status: str,
    *,
    result: str | None,
    error: str | None,
    now: float,
    alone: bool = False,
) -> Program[None]:
    """End a run held by `lease` and release it. Raises LeaseLost if not held.

    In the same transaction: a parent run gets a message on channel `child:RUN_ID` (and is
    woken), the run's unfinished attached children are asked to cancel, and its open human
    tasks become "cancelled". `alone` (the caller knows the run has no parent, children or
    tasks) skips that part.
    """
    params = (status, result, error, now, now, run_id, lease.owner, lease.fence)
    if alone:
        return _finish_owned(run_id, params)
    return _finish_and_tell(run_id, params, status, result, error, now)


def _finish_owned(run_id: str, params: tuple[Any, ...]) -> Program[None]:
    if not (yield Sql(_sql.FINISH_RUN, params)):
        raise LeaseLost(run_id)


def _finished_row(run_id: str, lease: Lease, status: str, result: str, now: float) -> Fenced:
    return (
        _sql.FINISH_RUN,
        (status, result, None, now, now, run_id, lease.owner, lease.fence),
        run_id,
    )


@operation
@fenced(_finished_row)
@single_write
@path("one")
def finish_alone(run_id: str, lease: Lease, status: str, result: str, now: float) -> Program[None]:
    """`finish_run(..., error=None, alone=True)`, declared one fenced statement.

    A group commit on SQLite runs it without its program (core/common_runs.py: the end of
    nearly every run). Raises LeaseLost if the run is not held.
    """
    text, params, run_id = _finished_row(run_id, lease, status, result, now)
    if not (yield Sql(text, params)):
        raise LeaseLost(run_id)


def _finish_and_tell(
    run_id: str,
    params: tuple[Any, ...],
    status: str,
    result: str | None,
    error: str | None,
    now: float,
) -> Program[None]:
    yield from lock_family(run_id)
    yield from _finish_owned(run_id, params)
    yield from after_finish(run_id, status, result, error, now)


def lock_family(run_id: str) -> Program[None]:
    """Lock, by run_id, the run and the runs its end writes (its parent, its children).

    Each would otherwise be locked as its statement comes (the run, its parent, then its
    children), an order that closes a circle with anything that locks some of them in
    another: a heartbeat that registers its worker again locks the runs it owns
    (programs/workers.py `beat_at`), and the end of the parent cancels this run while
    this one tells the parent. Every lock of several runs that waits takes them by
    run_id, so none waits for a run ordered before one it holds. SQLite's write
    transaction is exclusive: this is a read there.
    """
    yield Sql(_sql.SELECT_FAMILY, (run_id, run_id, run_id), "all", "hold")


def after_finish(
    run_id: str, status: str, result: str | None, error: str | None, now: float
) -> Program[None]:
    """What a run's end does to others: its parent is told, its children and tasks end.

    Its attempts on step queues end too (programs/step_tasks.py `end_with_run`).
    """
    row = yield one_row(_sql.SELECT_PARENT, (run_id,))
    if row is not None and row[0] is not None:
        message = _sql.child_message(run_id, status, result, error)
        channel = f"child:{run_id}"
        yield Sql(_sql.INSERT_MESSAGE, (row[0], channel, message, None, now))
        yield Sql(_sql.WAKE_WAITING, (now, row[0], channel))
    yield Sql(_sql.CANCEL_CHILDREN, (now, now, now, run_id))
    # Nobody will wait for the run's open tasks any more: withdraw them from the inbox.
    yield Sql(_sql.CLOSE_TASKS, ("cancelled", run_id, None, None))
    yield from step_tasks.end_with_run(run_id, now)  # nor for its step-queue attempts


@operation
@wakes
def continue_run(run_id: str, lease: Lease, new_run: RunRecord, now: float) -> Program[bool]:
    """End a run as CONTINUED and create its successor, in one transaction.

    `continued_to` of the old run names `new_run`, and the events queued for the old run
    that none of its waits took are queued for `new_run` instead. Raises LeaseLost if not
    held.

    A cancel stored for the run that it did not meet (it came after the run's last
    durable point, or while its worker was busy) ends the chain instead: nothing is
    written and False is returned, for the caller to end the run CANCELLED. A pause so
    stored passes to the successor, which is created PAUSED. Either would otherwise be
    lost with the run: the successor starts with no request.
    """
    yield from lock_family(run_id)
    row = yield one_row(_sql.SELECT_HELD_CONTROL, (run_id, lease.owner, lease.fence))
    if row is None:
        raise LeaseLost(run_id)
    if row[0] == "cancel":
        return False
    if row[0] == "pause":
        new_run = replace(new_run, status=RunStatus.PAUSED.value)
    params = (new_run.run_id, now, now, run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.CONTINUE_RUN, params)):
        raise LeaseLost(run_id)
    yield Sql(_sql.INSERT_RUN, _sql.run_params(new_run))
    yield Sql(_sql.PASS_ON_EVENTS, (new_run.run_id, run_id))
    # A parent waiting on this run learns the successor's id (in `result`).
    yield from after_finish(run_id, RunStatus.CONTINUED, new_run.run_id, None, now)
    return True


def _park_path(
    run_id: str,
    lease: Lease,
    status: str,
    *,
    wake_at: float | None,
    waiting_for: str | None,
    now: float,
    waits_on: Sequence[str] | None = None,
    futile_wakes: int = 0,
) -> Path:
    return "unknown", wake_at  # claimable again at wake_at


@operation
@path(_park_path)
def park_run(
    run_id: str,
    lease: Lease,
    status: str,
    *,
    wake_at: float | None,
    waiting_for: str | None,
    now: float,
    waits_on: Sequence[str] | None = None,
    futile_wakes: int = 0,
) -> Program[None]:
    """Park a run held by `lease` (SLEEPING, WAITING, PAUSED) and release it.

    It becomes claimable again at `wake_at`. A WAITING run's `waits_on` are the channels
    its open waits consume: a message on one of them makes it claimable at once (one
    already queued too), a message on any other channel does not. None: any message does
    (what runs parked before waits_on existed get). `futile_wakes` is stored for people to
    see (see RunRecord). Raises LeaseLost if not held.
    """
    due = wake_at
    channels = None if waits_on is None else json.dumps(list(waits_on))
    if status == RunStatus.WAITING:
        # A message its waits take arrived while the run was deciding to wait.
        if channels is None:
            found = yield one_row(_sql.HAS_MESSAGES, (run_id,))
        else:
            found = yield one_row(_sql.HAS_MESSAGES_ON, (run_id, channels))
        if found:
            due = now
    fence = (run_id, lease.owner, lease.fence)
    params = (status, due, waiting_for, channels, futile_wakes, now, *fence)
    if not (yield Sql(_sql.PARK_RUN, params)):
        raise LeaseLost(run_id)
    # A cancel or pause that came after the run's last durable point is acted on now.
    yield Sql(_sql.PARKED_CONTROL, (now, run_id))


@operation
def note_held(run_id: str, lease: Lease, note: str | None) -> Program[bool]:
    """Say what run `run_id`, executing, waits for (None: nothing any more).

    Only while `lease` holds the run; returns whether it did. The run's next claim, park
    or end replaces the note.
    """
    return bool((yield Sql(_sql.NOTE_HELD, (note, run_id, lease.owner, lease.fence))))


@operation
def note_parked(run_id: str, note: str, instead_of: str) -> Program[bool]:
    """Say `note` for what WAITING run `run_id` waits for, while that is `instead_of`.

    What a worker executing a parked run's attempt (a step queue's) says of a wait of
    its own, and then undoes with the arguments swapped. Returns whether it was said.
    """
    return bool((yield Sql(_sql.NOTE_PARKED, (note, run_id, instead_of))))


@operation
def update_run_meta(
    run_id: str, *, columns: dict[str, str] | None, progress: str | None, now: float
) -> Program[None]:
    """Merge indexed columns (name -> JSON text) and set progress (JSON text).

    None leaves a field unchanged; an unknown run is left alone (nothing is written).
    """
    merged = None
    if columns:
        # Lock the run row first: concurrent merges (a step and its workflow setting
        # columns at once) then see each other's columns instead of overwriting them.
        row = yield Sql(_sql.SELECT_RUN_CREATED, (run_id,), "one", "update")
        if row is None:
            return  # no such run: nothing to describe
        for name, value in columns.items():
            yield Sql(_sql.INSERT_COLUMN, (run_id, name, value, row[0]))
        rows = yield all_rows(_sql.SELECT_COLUMNS, (run_id,))
        merged = _sql.columns_json(rows)
    yield Sql(_sql.UPDATE_META, (merged, progress, now, run_id))


@operation
@one_plan(_sql.one_plan_fits)
def list_runs(query: RunQuery) -> Program[list[RunRecord]]:
    """Read: runs matching `query`, newest first, at most `query.limit` of them.

    A query whose best plan does not depend on its values is read as `read_one_plan`.
    """
    text, params = _sql.list_runs(query)
    rows = yield all_rows(text, params)
    return [_sql.run_from_row(row) for row in rows]


@operation
def count_runs(query: RunQuery, limit: int | None = None) -> Program[dict[str, int]]:
    """Read: how many runs match `query`'s filters, by status, in one read.

    `query.status`, `cursor` and `limit` are ignored; statuses without runs are absent.
    With `limit` and no filter, each status is counted up to `limit` (a count equal to
    `limit` is then a lower bound, the others are exact): a read bounded by `limit`
    whatever the size of the table. With `limit` and filters, counting stops after that
    many matching runs in all (in no particular order): counts that add up to `limit` are
    then lower bounds.
    """
    text, params = _sql.count_runs(query, limit)
    rows = yield all_rows(text, params)
    return {str(status): int(n) for status, n in rows if n}
