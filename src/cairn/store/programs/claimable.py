"""What a claim could take now, read for a transport that publishes runs (cairn.celery).

The claim its message leads to decides (`claims.claim`, with the queue limits and the
liveness rules); this read only lists candidates, each with a mark that changes when the
run comes back in another state.
"""

from __future__ import annotations

from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs.base import Program, all_rows, operation

_DUE = (
    "SELECT run_id, status, queue, COALESCE(wake_at, created_at) FROM runs WHERE "
    "((status IN ('SLEEPING', 'WAITING') AND wake_at <= ?) "
    "OR (status = 'PENDING' AND (wake_at IS NULL OR wake_at <= ?))) "
    "ORDER BY COALESCE(wake_at, created_at) LIMIT ?"
)


@operation
def claimable_runs(
    *, now: float, limit: int, stale: bool, workflows: list[str]
) -> Program[list[tuple[str, str, str | None, float]]]:
    """Read: up to `limit` runs of each kind `claim_runs` could take now.

    Due, pending and orphaned ones, each as (run id, status, queue, mark): the mark
    changes when the run comes back in another state (its wake time; an orphan's fence).
    What a transport publishes (see cairn.celery): the claim its message leads to
    decides, with the queue limits and the liveness rules of `claim_runs`. Orphans count
    as `claim_runs` judges them with `stale`.
    """
    if not workflows:
        return []
    known = tuple(workflows)
    due = _sql.restrict(_DUE, "workflow", workflows)
    found = [
        (r[0], r[1], r[2], float(r[3])) for r in (yield all_rows(due, (*known, now, now, limit)))
    ]
    orphaned = _sql.restrict(
        _sql.SELECT_ORPHANED if stale else _sql.SELECT_ORPHANED_DEAD, "workflow", workflows
    ).replace(
        f"SELECT {_sql.ORPHAN_COLUMNS}",
        "SELECT run_id, queue, fence",
        1,
    )
    for run_id, queue, fence in (yield all_rows(orphaned, (*known, "", limit))):
        found.append((run_id, RunStatus.RUNNING, queue, float(fence)))
    return found
