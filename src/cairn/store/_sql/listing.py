"""The runs list and its counts: filters of a RunQuery as SQL text and parameters."""

from __future__ import annotations

import json
from typing import Any

from cairn.models import UNKNOWN_ORIGIN, RunStatus
from cairn.store._sql.columns import LISTED_RUN_COLUMNS
from cairn.store.records import (
    RunQuery,
)


def list_runs(query: RunQuery) -> tuple[str, list[Any]]:
    """SELECT text and parameters for `query`, newest first.

    Without a column filter the runs are read in page order from runs_by_created, or from
    runs_by_status_created for a status (runs_by_origin for an origin). With one, the
    first column's entries drive: its index (name, value, created_at, run_id) yields the
    matches newest first, so a page costs about a page of reads whether the value is rare
    or shared by most runs (short of a rare status combined with a common value).

    A run id prefix lists its matches by run id, descending, walking its range of the
    primary key: a page costs a page of reads whether one run has the prefix or all of
    them do (sorting a common prefix's matches by time read them all). Generated ids
    begin with their creation time, so for them this is newest first too; the cursor's
    run id alone then says where the next page starts.
    """
    source, order, where, params = _run_filters(query, status=True)
    by_id = query.run_id_prefix is not None
    if query.cursor is not None and by_id:
        where.append("runs.run_id < ?")
        params.append(query.cursor[1])
    elif query.cursor is not None:
        where.append(f"({order}.created_at < ? OR ({order}.created_at = ? AND {order}.run_id < ?))")
        params.extend((query.cursor[0], query.cursor[0], query.cursor[1]))
    sql = f"SELECT {LISTED_RUN_COLUMNS} FROM {source}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if by_id:
        sql += " ORDER BY runs.run_id DESC LIMIT ?"
    else:
        sql += f" ORDER BY {order}.created_at DESC, {order}.run_id DESC LIMIT ?"
    params.append(query.limit)
    return sql, params


def one_plan_fits(query: RunQuery) -> bool:
    """True if `list_runs(query)`'s best plan is the same whatever its values.

    So it is when the page is read in the order of the one index its only filter leads
    (none, a status, one column or an origin, with a cursor or a time range at most):
    the plan is that index's scan up to the limit however common the value is, and a
    database that caches plans can plan it once. With two filters, how rare each value
    is decides which should drive.
    """
    others = (query.workflow, query.parent_id, query.version, query.run_id_prefix, query.tree)
    if any(other is not None for other in others):
        return False
    return (query.status is not None) + len(query.columns) + (query.origin is not None) <= 1


def count_runs(query: RunQuery, limit: int | None = None) -> tuple[str, list[Any]]:
    """SELECT (status, count) rows of the runs `query` matches whatever their status.

    One query over the same filters as `list_runs` (its status, cursor and limit aside):
    the runs page's count per status. With `limit` (see programs/runs.py count_runs), a query with
    no filter counts each status on its own, up to `limit`, from its range of the status
    index: a read bounded by the limit however many runs the table holds (grouping the
    whole table read all of them: over 110,000 runs that added 6 ms to the runs page on
    SQLite and 38 ms on PostgreSQL). With filters, whose matches must each be read, at
    most `limit` matching runs are counted in all.
    """
    source, _, where, params = _run_filters(query, status=False)
    if limit is not None and not where:
        # The statuses are the enum's own names, written into the text (a parameter in
        # the select list has no type PostgreSQL can infer).
        parts = [
            f"SELECT '{status.value}', COUNT(*) FROM "
            f"(SELECT 1 FROM runs WHERE status = '{status.value}' LIMIT ?) AS s{i}"
            for i, status in enumerate(RunStatus)
        ]
        return " UNION ALL ".join(parts), [limit] * len(parts)
    matching = f" FROM {source}" + (" WHERE " + " AND ".join(where) if where else "")
    if limit is None:
        return f"SELECT runs.status, COUNT(*){matching} GROUP BY runs.status", params
    inner = f"SELECT runs.status{matching} LIMIT ?"
    return f"SELECT status, COUNT(*) FROM ({inner}) AS matched GROUP BY status", [*params, limit]


# How many generations below a run a tree filter reaches (tasks of a run and its
# descendants, runs of a tree): deep enough for any real nesting, and a bound on the walk.
TREE_DEPTH = 16


def run_tree(column: str) -> str:
    """`column IN (...)`: the run given as the parameter and its descendants.

    A recursive walk of runs_by_parent from the run, at most TREE_DEPTH generations down;
    one parameter, the run's id.
    """
    return (
        f"{column} IN (WITH RECURSIVE tree(run_id, depth) AS ("
        "SELECT CAST(? AS TEXT), 0 UNION ALL "
        "SELECT kin.run_id, tree.depth + 1 FROM runs kin JOIN tree ON kin.parent_id = tree.run_id "
        f"WHERE tree.depth < {TREE_DEPTH}) SELECT run_id FROM tree)"
    )


# The upper end of a run id prefix's range: past every id that starts with the prefix.
PREFIX_END = chr(0x10FFFF)


def _run_filters(query: RunQuery, *, status: bool) -> tuple[str, str, list[str], list[Any]]:
    """(FROM source, the table that orders the page, WHERE terms, parameters) of `query`."""
    where: list[str] = []
    params: list[Any] = []
    source, order = "runs", "runs"
    columns = list(query.columns.items())
    if columns:
        name, value = columns.pop(0)
        source, order = "run_columns c JOIN runs ON runs.run_id = c.run_id", "c"
        where.append("c.name = ? AND c.value = ?")
        params.extend((name, value))
    if status and query.status is not None:
        where.append("runs.status = ?")
        params.append(query.status)
    if query.workflow is not None:
        where.append("runs.workflow = ?")
        params.append(query.workflow)
    if query.since is not None:
        where.append(f"{order}.created_at >= ?")
        params.append(query.since)
    if query.until is not None:
        where.append(f"{order}.created_at < ?")
        params.append(query.until)
    if query.parent_id is not None:
        where.append("runs.parent_id = ?")
        params.append(query.parent_id)
    if query.tree is not None:
        where.append(run_tree("runs.run_id"))
        params.append(query.tree)
    if query.version is not None:
        where.append("runs.version = ?")
        params.append(query.version)
    if query.origin == UNKNOWN_ORIGIN:
        where.append("runs.origin IS NULL")
    elif query.origin is not None:
        where.append("runs.origin = ?")
        params.append(query.origin)
    if query.run_id_prefix is not None:
        # A range of the primary key (LIKE 'p%' would not use it: SQLite's LIKE ignores
        # case, PostgreSQL's needs the C collation), then the exact test, which a
        # database collation that does not sort by code point needs.
        prefix = query.run_id_prefix
        where.append("runs.run_id >= ? AND runs.run_id < ? AND substr(runs.run_id, 1, ?) = ?")
        params.extend((prefix, prefix + PREFIX_END, len(prefix), prefix))
    for name, value in columns:
        where.append(
            "EXISTS (SELECT 1 FROM run_columns o WHERE o.run_id = runs.run_id "
            "AND o.name = ? AND o.value = ?)"
        )
        params.extend((name, value))
    return source, order, where, params


def poison_error(run_id: str, recoveries: int) -> str:
    """The stored error of a run given up after too many recoveries."""
    message = (
        f"run {run_id!r} was recovered {recoveries} time(s) without finishing; "
        "giving up (max_recoveries)"
    )
    return json.dumps({"type": "cairn.errors.PoisonRun", "message": message, "traceback": ""})
