"""Programs that write a run's journal: steps and failed attempts (waits: see `waits`)."""

from __future__ import annotations

from cairn.store import _sql
from cairn.store.programs.base import Program, Sql, single_write
from cairn.store.protocol import LeaseLost
from cairn.store.records import AttemptRecord, Lease, StepRecord


@single_write
def record_step(lease: Lease, step: StepRecord, *, upsert: bool = False) -> Program[None]:
    """Insert (or upsert) a journal entry of a run held by `lease`."""
    text = _sql.UPSERT_STEP_OWNED if upsert else _sql.INSERT_STEP_OWNED
    if not (yield Sql(text, _sql.step_params(step, lease))):
        raise LeaseLost(step.run_id)


def record_attempt(lease: Lease, attempt: AttemptRecord) -> Program[None]:
    """Insert a failed attempt of a step of a run held by `lease`."""
    params = (attempt.failed_at, attempt.run_id, lease.owner, lease.fence)
    if not (yield Sql(_sql.TOUCH_OWNED, params)):
        raise LeaseLost(attempt.run_id)
    yield Sql(_sql.INSERT_ATTEMPT, _sql.attempt_params(attempt))
