"""Programs of operator control: cancel, pause, resume, retry, restart and fork."""

from __future__ import annotations

import json
from collections.abc import Callable

from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs.base import FINISHED, Program, Sql, all_rows, one_row, operation, wakes
from cairn.store.programs.runs import after_finish
from cairn.store.records import Lineage, RetriedStep, RunRecord


@operation
@wakes
def control_run(run_id: str, action: str, *, now: float) -> Program[str | None]:
    """Apply cancel / pause / resume; the status after, None if no such run."""
    row = yield one_row(_sql.SELECT_CONTROL_STATE, (run_id,))
    if row is None:
        return None
    status, attempt, _owner, pending = row
    status = str(status)
    if status in FINISHED:
        return status
    if pending == "cancel" and action != "cancel":
        return status  # a cancel requested stands: a pause or resume would erase it
    if action == "cancel":
        if (
            status in (RunStatus.PENDING, RunStatus.PAUSED)
            and attempt == 0
            and (yield one_row(_sql.SELECT_STARTED, (run_id,))) is None
        ):
            yield Sql(_sql.CANCEL_UNSTARTED, (now, now, run_id))
            yield from after_finish(run_id, RunStatus.CANCELLED, None, None, now)
            return RunStatus.CANCELLED
        if status == RunStatus.PAUSED:
            yield Sql(_sql.RESUME_PAUSED, (now, now, run_id))
        if status in (RunStatus.SLEEPING, RunStatus.WAITING, RunStatus.PENDING, RunStatus.PAUSED):
            yield Sql(_sql.SET_CONTROL_AND_WAKE, ("cancel", now, now, run_id))
        else:
            yield Sql(_sql.SET_CONTROL, ("cancel", now, run_id))
        return status
    if action == "pause":
        if status in (RunStatus.SLEEPING, RunStatus.WAITING, RunStatus.PENDING):
            yield Sql(_sql.PAUSE_PARKED, (now, run_id))
            return RunStatus.PAUSED
        if status == RunStatus.RUNNING:
            yield Sql(_sql.SET_CONTROL, ("pause", now, run_id))
        return status
    if action == "resume":
        if status == RunStatus.PAUSED:
            yield Sql(_sql.RESUME_PAUSED, (now, now, run_id))
            return RunStatus.PENDING if attempt == 0 else RunStatus.WAITING
        if status == RunStatus.RUNNING:
            yield Sql(_sql.SET_CONTROL, (None, now, run_id))
        return status
    raise ValueError(f"unknown control action {action!r} (cancel, pause or resume)")


@operation
@wakes
def retry_run(
    run_id: str,
    *,
    now: float,
    by: str | None = None,
    child_failed: Callable[[str, str | None], bool] | None = None,
) -> Program[bool]:
    """Requeue a FAILED run as its next execution; False if not FAILED.

    A failed last entry moves from the journal to retried_steps, so that its step runs
    again and the history still shows how it failed. A run whose last entry is the wait
    for a child of its own that FAILED, and whose stored error `child_failed(run_id,
    error)` says is that failure (ChildFailed, told from its type: the caller can read an
    encrypted one, and raises, undoing the retry, when it cannot), has that entry go too,
    and the child is retried (and so on down, at most `RETRY_DEPTH` generations): the
    parent's replay finds it unfinished and waits for it again, where it would otherwise
    be handed the same failure at once.
    """
    return (yield from _retried(run_id, now, by, child_failed, RETRY_DEPTH))


# How many generations down a retry follows a failed child (a parent failed by its child,
# failed by its own child...).
RETRY_DEPTH = 16


def _retried(
    run_id: str,
    now: float,
    by: str | None,
    child_failed: Callable[[str, str | None], bool] | None,
    depth: int,
) -> Program[bool]:
    row = yield Sql(_sql.SELECT_EXECUTION, (run_id,), "one", "update")
    if row is None:
        return False
    last = yield one_row(_sql.LAST_STEP, (run_id,))
    if not (yield Sql(_sql.REQUEUE_FAILED, (now, run_id))):
        return False
    from_seq = 1 if last is None else int(last[2]) + 1
    child_id = None
    if last is not None and depth > 0 and child_failed is not None:
        # A child's wait records its end, a failure too: a failed child of its own, last.
        child = yield one_row(_sql.CHILD_END_OF_ENTRY, (run_id, last[0]))
        child_id = None if child is None else _failed_child(child[0])
        owned = (
            None
            if child_id is None
            else (yield one_row(_sql.SELECT_CHILD_STATUS, (child_id, run_id)))
        )
        if owned is None or owned[0] != RunStatus.FAILED:  # not a failed child of its own
            child_id = None
        elif not child_failed(run_id, row[1]):  # caught, then the run failed otherwise
            child_id = None
    if last is not None and (last[1] == "failed" or child_id is not None):
        key, seq = last[0], int(last[2])
        found = yield one_row(_sql.EXECUTION_OF_SEQ, (run_id, seq))
        recorded_in = 1 if found is None or found[0] is None else int(found[0])
        yield Sql(_sql.RETIRE_STEP, (recorded_in, run_id, key))
        yield Sql(_sql.DELETE_STEP, (run_id, key))
        from_seq = seq
    if child_id is not None:  # its entry gone, the parent waits for it again: retry it
        yield from _retried(child_id, now, by, child_failed, depth - 1)
    execution = int(row[0]) + 1
    yield Sql(_sql.INSERT_EXECUTION, (run_id, execution, now, "retry", by, from_seq))
    return True


def _failed_child(text: str | None) -> str | None:
    """The run a child entry's stored end names (`{"run_id": ...}`) if it FAILED, else None."""
    try:
        found = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(found, dict) or found.get("status") != RunStatus.FAILED:
        return None
    child_id = found.get("run_id")
    return child_id if isinstance(child_id, str) else None


@operation
def copy_run(
    new_run: RunRecord,
    source_id: str,
    *,
    before_seq: int | None,
    by: str | None = None,
    now: float,
) -> Program[None]:
    """Create `new_run` as a copy of the source: a restart, or a fork before `before_seq`.

    A fork takes the source's entries before `before_seq` that are not "waiting", and
    the stream items of those steps and of workflow code before that point.
    """
    yield Sql(_sql.INSERT_RUN, _sql.run_params(new_run))
    cause = "restart" if before_seq is None else "fork"
    if before_seq is not None:
        yield Sql(_sql.COPY_STEPS, (new_run.run_id, source_id, before_seq))
        copied = (new_run.run_id, source_id, before_seq, new_run.run_id)
        yield Sql(_sql.COPY_STREAMS, copied)  # the copied steps' streams
    params = (new_run.run_id, 1, now, cause, by, before_seq or 1)
    yield Sql(_sql.INSERT_EXECUTION, params)


@operation
def load_lineage(run_id: str) -> Program[Lineage]:
    """Read: what a run's audit trail adds to its journal.

    Its ExecutionRecords (by number), the entries retries took out of its journal (by
    execution, then seq), and the runs restarted or forked from it (oldest first).
    """
    executions = yield all_rows(_sql.SELECT_EXECUTIONS, (run_id,))
    retried = yield all_rows(_sql.SELECT_RETRIED, (run_id,))
    copies = yield all_rows(_sql.SELECT_COPIES, (run_id, run_id))
    return Lineage(
        [_sql.execution_from_row(row) for row in executions],
        [RetriedStep(int(row[0]), _sql.step_from_row(row[1:])) for row in retried],
        [_sql.run_from_row(row) for row in copies],
    )


@operation
def controlled_runs(owner: str) -> Program[list[tuple[str, str]]]:
    """Read: (run_id, control) of the runs `owner` (a worker id) holds with a pending request."""
    rows = yield all_rows(_sql.SELECT_CONTROLLED, (owner,))
    return [(str(run_id), str(control)) for run_id, control in rows]
