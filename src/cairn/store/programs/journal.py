"""Programs that write a run's journal: steps and failed attempts (waits: see `waits`)."""

from __future__ import annotations

from typing import Any

from cairn.store import _sql
from cairn.store.programs.base import (
    Fenced,
    Program,
    Sql,
    all_rows,
    fenced,
    operation,
    path,
    single_write,
)
from cairn.store.protocol import LeaseLost
from cairn.store.records import AttemptRecord, Lease, StepRecord


def _step_row(lease: Lease, step: StepRecord) -> Fenced:
    # _sql.step_params(step, lease), inlined: a step's row is made for every step.
    params = (*_sql.step_values(step), step.run_id, lease.owner, lease.fence)
    return _sql.INSERT_STEP_OWNED, params, step.run_id


@operation
@fenced(_step_row)
@single_write
@path("one")
def record_step(lease: Lease, step: StepRecord) -> Program[None]:
    """Commit a step outcome for a run held by `lease`. Raises LeaseLost if not held.

    On PostgreSQL a write whose reply was lost is sent again; if that second try fails
    the outcome of the first is unknown: StoreUnavailable with `.unknown` set.
    """
    text, params, run_id = _step_row(lease, step)
    if not (yield Sql(text, params)):
        raise LeaseLost(run_id)


# An upsert's row count does not tell whether it replaced a row: its rounds are unknown.
@operation
@single_write
@path("unknown")
def upsert_step(lease: Lease, step: StepRecord) -> Program[None]:
    """`record_step`, replacing an entry with the same key (a "waiting" one)."""
    if not (yield Sql(_sql.UPSERT_STEP_OWNED, _sql.step_params(step, lease))):
        raise LeaseLost(step.run_id)


@operation
def record_attempt(lease: Lease, attempt: AttemptRecord) -> Program[None]:
    """Commit a failed attempt of a step. Raises LeaseLost if not held."""
    params = (attempt.failed_at, attempt.run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.TOUCH_OWNED, params)):
        raise LeaseLost(attempt.run_id)
    yield Sql(_sql.INSERT_ATTEMPT, _sql.attempt_params(attempt))


@operation
def load_journal(
    run_id: str, *, inputs: bool = False, after_seq: int = 0, limit: int | None = None
) -> Program[list[StepRecord]]:
    """Read: every recorded outcome of the run, in seq order.

    Each step's `input` is read only with `inputs` (for its history): a replay needs
    none, and they can be large. Without it, `input` is None. A page of a long history:
    only entries with seq > `after_seq`, at most `limit` of them.
    """
    text = _sql.SELECT_HISTORY if inputs else _sql.SELECT_JOURNAL
    params: tuple[Any, ...] = (run_id,)
    if after_seq or limit is not None:
        text = text.replace("WHERE run_id = ?", "WHERE run_id = ? AND seq > ?")
        params = (run_id, after_seq)
        if limit is not None:
            text += " LIMIT ?"
            params = (run_id, after_seq, limit)
    rows = yield all_rows(text, params)
    return [_sql.step_from_row(row) for row in rows]


@operation
def journal_extent(run_id: str) -> Program[tuple[int, int]]:
    """Read: how many entries the run's journal holds, and its highest seq ((0, 0) if none).

    One read that counts without loading them (the dashboard's run page and stream).
    """
    rows = yield all_rows(_sql.JOURNAL_EXTENT, (run_id,))
    count, top = rows[0] if rows else (0, 0)
    return int(count or 0), int(top or 0)


@operation
def load_attempts(run_id: str) -> Program[list[AttemptRecord]]:
    """Read: every failed or interrupted attempt of the run, by execution, key, attempt."""
    rows = yield all_rows(_sql.SELECT_ATTEMPTS, (run_id,))
    return [_sql.attempt_from_row(row) for row in rows]
