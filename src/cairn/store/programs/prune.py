"""Retention: delete finished runs past an age with every row they own, one batch at a time.

One batch is one transaction over at most `limit` finished runs, oldest finished first,
going on from where the previous batch stopped (so runs that must be kept are not read
again and again). A run is kept, whatever its age, while an unfinished run depends on it:
its parent is unfinished (whose history names it), one of its children is unfinished (the
child tells its parent when it ends), or a later run of its continue_as_new chain is
unfinished. The runs read as finished that a decision rests on are locked until commit,
so a retry of one either is seen or waits for the prune (see _still_finished). The runs
row is deleted first, with its conditions checked again in the same statement: a run
retried (FAILED back to PENDING) between the scan and the delete is left alone, and two
prunes at once delete each run once. Its other rows go in the same transaction, so no
run is ever seen half deleted, and so does the emit key that started it once no run of
that key is left (see _forget_emit_keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cairn.models import RunStatus
from cairn.store import _sql
from cairn.store.programs import schedules
from cairn.store.programs.base import FINAL, FINISHED, Operation, Program, Sql, all_rows, operation
from cairn.store.records import Pruned, PruneQuery

# Every table with rows of one run, besides runs itself (see the migrations): a migration
# that adds one adds it here, or pruned runs leave orphans behind (tests/store/test_prune
# checks every table of the schema against this list).
RUN_TABLES = (
    "run_columns",
    "steps",
    "step_attempts",
    "messages",
    "hooks",
    "tasks",
    "run_executions",
    "retried_steps",
    "step_tasks",
    "stream_chunks",
)
# Tables whose rows are not any one run's (emit_keys: a key's row goes with the last run
# it started, see _forget_emit_keys).
OTHER_TABLES = (
    "runs",
    "workers",
    "schedules",
    "subscriptions",
    "emit_keys",
    "queues",
    "known_workflows",
    "cairn_migrations",
)
_FINAL_SQL = _sql.statuses_sql(FINAL)


def _marks(values: Sequence[Any]) -> str:
    return _sql.placeholders(len(values))


def _scan(query: PruneQuery, after: tuple[float, str] | None, limit: int) -> Sql:
    """The next `limit` finished runs past the age, oldest finished first."""
    statuses = query.statuses or tuple(sorted(FINISHED))
    # `status || ''` and `workflow || ''` keep planners off the status indexes and
    # runs_by_workflow (SQLite, which keeps no statistics, took a status index and sorted
    # every finished run for each batch): runs_by_finished gives the range and the order.
    where = [
        f"(status || '') IN ({_marks(statuses)})",
        "finished_at IS NOT NULL",
        "finished_at < ?",
    ]
    params: list[Any] = [*statuses, query.finished_before]
    if query.workflow is not None:
        where.append("(workflow || '') = ?")
        params.append(query.workflow)
    if after is not None:
        where.append("(finished_at, run_id) > (?, ?)")
        params += [after[0], after[1]]
    text = (
        "SELECT run_id, finished_at, parent_id, continued_to FROM runs "
        f"WHERE {' AND '.join(where)} ORDER BY finished_at, run_id LIMIT ?"
    )
    return all_rows(text, [*params, limit])


def _settled(rows: Sequence[Sequence[Any]]) -> Program[set[str]]:
    """Of `rows` (run_id, status, ...), the runs finished and sure to stay so until commit.

    PostgreSQL reads each statement's own snapshot: a FAILED run may be retried (back to
    PENDING) by another transaction before this one deletes what it no longer depends
    on. Locking the FAILED ones FOR SHARE closes that gap: a retry under way is waited
    for and the row read again (no longer FAILED, so not settled), and a later retry
    waits for this transaction. The other finished statuses are final (see FINAL) and
    unfinished runs are never locked, so workers never wait for retention. (SQLite's
    write transaction is exclusive: nothing changes between two of its statements.)
    """
    settled = {str(row[0]) for row in rows if row[1] in FINAL}
    failed = [str(row[0]) for row in rows if row[1] == RunStatus.FAILED]
    if failed:
        # `status || ''`: see _delete.
        locked = yield Sql(
            f"SELECT run_id FROM runs WHERE run_id IN ({_marks(failed)}) "
            "AND (status || '') = 'FAILED'",
            failed,
            "all",
            "share",
        )
        settled |= {str(row[0]) for row in locked}
    return settled


def _unfinished_parents(parents: list[str]) -> Program[set[str]]:
    """The `parents` that are unfinished (a parent that no longer exists is not)."""
    if not parents:
        return set()
    rows = yield all_rows(
        f"SELECT run_id, status FROM runs WHERE run_id IN ({_marks(parents)})", parents
    )
    settled = yield from _settled(rows)
    return {str(row[0]) for row in rows} - settled


def _with_unfinished_children(ids: list[str]) -> Program[set[str]]:
    """The `ids` with a child that is unfinished."""
    rows = yield all_rows(
        f"SELECT run_id, status, parent_id FROM runs WHERE parent_id IN ({_marks(ids)}) "
        f"AND status NOT IN {_FINAL_SQL}",
        ids,
    )
    settled = yield from _settled(rows)
    return {str(row[2]) for row in rows if str(row[0]) not in settled}


def _chain_blocked(successors: dict[str, str]) -> Program[set[str]]:
    """The candidates (id -> continued_to) with an unfinished run later in their chain.

    One statement reads every later run of every chain (each once), then each chain is
    followed here: a chain of 10,000 runs costs 10,000 rows, not one round trip each.
    """
    if not successors:
        return set()
    starts = list(successors)
    rows = yield all_rows(
        "WITH RECURSIVE later(run_id) AS ("
        f" SELECT continued_to FROM runs WHERE run_id IN ({_marks(starts)})"
        " AND continued_to IS NOT NULL"
        " UNION SELECT runs.continued_to FROM runs JOIN later ON runs.run_id = later.run_id"
        " WHERE runs.continued_to IS NOT NULL)"
        " SELECT runs.run_id, runs.status, runs.continued_to FROM runs"
        " JOIN later ON runs.run_id = later.run_id",
        starts,
    )
    read = {str(row[0]) for row in rows}
    # A later run read as FAILED but retried since (or deleted by another prune) is not
    # settled: taken as unfinished, it keeps its chain.
    settled = yield from _settled(rows)
    following = dict(successors)
    following.update({str(row[0]): str(row[2]) for row in rows if row[2] is not None})
    blocked_from: dict[str, bool] = {}

    def blocked(start: str) -> bool:
        path: list[str] = []
        current: str | None = following.get(start)
        verdict = False
        while current is not None and current not in path:
            if current in blocked_from:
                verdict = blocked_from[current]
                break
            path.append(current)
            if current not in read:  # already deleted: the chain ends here
                break
            if current not in settled:
                verdict = True
                break
            current = following.get(current)
        for run_id in path:
            blocked_from.setdefault(run_id, verdict)
        return verdict

    return {start for start in starts if blocked(start)}


def _delete(query: PruneQuery, ids: list[str]) -> Program[list[str]]:
    statuses = query.statuses or tuple(sorted(FINISHED))
    # The checks again, written so that no index serves them: SQLite, which keeps no
    # statistics, read every finished run through the status index for each batch
    # (22 ms instead of 0.9 ms for 50 runs among 100,000), where the ids are 50 lookups.
    rows = yield all_rows(
        f"DELETE FROM runs WHERE run_id IN ({_marks(ids)}) "
        f"AND (status || '') IN ({_marks(statuses)}) AND finished_at + 0 < ? RETURNING run_id",
        [*ids, *statuses, query.finished_before],
    )
    deleted = [str(row[0]) for row in rows]
    if deleted:
        for table in RUN_TABLES:
            yield Sql(f"DELETE FROM {table} WHERE run_id IN ({_marks(deleted)})", deleted)
        yield from _forget_emit_keys(deleted)
    return deleted


def _forget_emit_keys(deleted: list[str]) -> Program[None]:
    """Delete the emit keys that started `deleted` runs, once none of their runs is left.

    A keyed emit remembers its key as long as one of the runs it started is kept: emitting
    it again meanwhile returns those runs. Once retention has deleted them all, the key
    goes too (else emit_keys grows for ever), and emitting it again starts new runs, under
    the same ids. The key rows are locked (in key order, so two prunes cannot deadlock)
    before their runs are looked for, so of two prunes deleting a key's last two runs at
    once, the second sees what the first deleted.
    """
    keys: dict[str, set[str]] = {}
    for run_id in deleted:
        if (emitted := schedules.emit_key_of(run_id)) is not None:
            keys.setdefault(emitted[0], set()).add(emitted[1])
    # One statement per event type (a batch has few), each on the primary key's range.
    started: dict[tuple[str, str], list[str]] = {}
    for event_type in sorted(keys):
        names = sorted(keys[event_type])
        rows = yield Sql(
            f"SELECT key, run_ids FROM emit_keys WHERE event_type = ? "
            f"AND key IN ({_marks(names)}) ORDER BY key",
            [event_type, *names],
            "all",
            "update",
        )
        started.update({(event_type, str(key)): json.loads(ids) for key, ids in rows})
    every = sorted({str(run_id) for run_ids in started.values() for run_id in run_ids})
    if not every:
        return
    kept = yield all_rows(f"SELECT run_id FROM runs WHERE run_id IN ({_marks(every)})", every)
    left = {str(row[0]) for row in kept}
    forgotten: dict[str, list[str]] = {}
    for (event_type, key), run_ids in started.items():
        if left.isdisjoint(run_ids):
            forgotten.setdefault(event_type, []).append(key)
    for event_type, names in sorted(forgotten.items()):
        yield Sql(
            f"DELETE FROM emit_keys WHERE event_type = ? AND key IN ({_marks(names)})",
            [event_type, *names],
        )


def prune_runs(
    query: PruneQuery,
    *,
    after: tuple[float, str] | None = None,
    limit: int = 500,
    dry_run: bool = False,
) -> Operation[Pruned]:
    """Delete one batch of finished runs past retention, in one short transaction.

    Looks at the next `limit` runs with a status in `query.statuses` (default: every
    finished one) that finished before `query.finished_before`, oldest finished first,
    after `after` (`Pruned.after` of the previous batch). Each is deleted with every row
    it owns (history, attempts, messages, hooks, tasks, columns, executions), unless an
    unfinished run depends on it: an unfinished parent, an unfinished child, or an
    unfinished later run of its continue_as_new chain. `dry_run` deletes nothing and
    counts what it would delete: a read (`store.read`), where a prune is a write.
    ValueError (at once) if `limit` is not positive.
    """
    if limit <= 0:
        raise ValueError(f"limit must be positive, got {limit!r}")
    return prune_batch(query, after, limit, dry_run)


@operation
def prune_batch(
    query: PruneQuery, after: tuple[float, str] | None, limit: int, dry_run: bool
) -> Program[Pruned]:
    """Delete (or with `dry_run` only count) the prunable runs among the next `limit`."""
    rows = yield _scan(query, after, limit)
    if not rows:
        return Pruned(0, None)
    last = rows[-1]
    resume = (float(last[1]), str(last[0])) if len(rows) == limit else None
    ids = [str(row[0]) for row in rows]
    parents = sorted({str(row[2]) for row in rows if row[2] is not None})
    busy_parents = yield from _unfinished_parents(parents)
    kept = {str(row[0]) for row in rows if row[2] is not None and str(row[2]) in busy_parents}
    kept |= yield from _with_unfinished_children(ids)
    successors = {str(row[0]): str(row[3]) for row in rows if row[3] is not None}
    kept |= yield from _chain_blocked(successors)
    doomed = [run_id for run_id in ids if run_id not in kept]
    if dry_run or not doomed:
        return Pruned(len(doomed), resume)
    deleted = yield from _delete(query, doomed)
    return Pruned(len(deleted), resume)
