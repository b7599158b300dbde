"""Claiming runs: pending and woken candidates, queue limits, orphans, poison."""

from __future__ import annotations

from cairn.store._sql.columns import ATTEMPT_COLUMNS, DB_NOW, FINISHED_SQL, for_runs, placeholders
from cairn.store.records import (
    ATTEMPT_FIELDS,
)

# Claiming, in two parts run inside one write transaction by each backend.
SELECT_PENDING = (
    "SELECT run_id, status, queue, partition_key, waiting_for, workflow, "
    "COALESCE(wake_at, created_at) FROM runs "
    "WHERE status = 'PENDING' AND (wake_at IS NULL OR wake_at <= ?) "
    "ORDER BY priority, created_at LIMIT ?"
)


def restrict(sql: str, column: str, values: list[str] | None) -> str:
    """`sql` with `column IN (values)` added first to its WHERE clause (None: unchanged).

    The values' placeholders come first, so pass them before the query's own parameters.
    """
    if values is None:
        return sql
    marks = ", ".join("?" * len(values))
    # `column || ''` keeps planners from picking the column's index for a filter that
    # rarely narrows anything (every run of a worker's workflows), over the due/status one.
    return sql.replace("WHERE ", f"WHERE ({column} || '') IN ({marks}) AND ", 1)


def leave_out(sql: str, column: str, values: list[str]) -> str:
    """`sql` without the rows whose `column` is one of `values` (NULL ones stay).

    As with `restrict`, the values' placeholders come first (nothing to leave: unchanged).
    """
    if not values:
        return sql
    marks = ", ".join("?" * len(values))
    return sql.replace("WHERE ", f"WHERE ({column} IS NULL OR {column} NOT IN ({marks})) AND ", 1)


# Queue limits. The queue row is locked while claiming so that concurrent claimers of one
# queue count each other's claims (PostgreSQL); SQLite's write transaction is exclusive.
SELECT_QUEUE = (
    "SELECT name, concurrency, per_worker, rate_count, rate_period, partition_concurrency "
    "FROM queues WHERE name = ?"
)
SELECT_QUEUES = (
    "SELECT name, concurrency, per_worker, rate_count, rate_period, partition_concurrency "
    "FROM queues ORDER BY name"
)
COUNT_EXECUTING = "SELECT COUNT(*) FROM runs WHERE queue = ? AND status = 'RUNNING'"
COUNT_EXECUTING_MINE = (
    "SELECT COUNT(*) FROM runs WHERE queue = ? AND status = 'RUNNING' AND owner = ?"
)
COUNT_EXECUTING_PARTITION = (
    "SELECT COUNT(*) FROM runs WHERE queue = ? AND status = 'RUNNING' AND partition_key = ?"
)
# Starts the rate counts: new, retried or handed back runs (CLAIM_ONE sets counted_start_at;
# a run no claim started counts at started_at). The expression is runs_queue_starts's.
COUNT_STARTS = (
    "SELECT COUNT(*) FROM runs WHERE queue = ? AND COALESCE(counted_start_at, started_at) >= ?"
)
SET_WAITING_FOR = "UPDATE runs SET waiting_for = ? WHERE run_id = ?"
# Code declarations win when they change; an operator's live update lasts until then.
DECLARE_QUEUE = (
    "INSERT INTO queues (name, concurrency, per_worker, rate_count, rate_period, "
    "partition_concurrency, declared, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, "
    "per_worker = excluded.per_worker, rate_count = excluded.rate_count, "
    "rate_period = excluded.rate_period, partition_concurrency = excluded.partition_concurrency, "
    "declared = excluded.declared, updated_at = excluded.updated_at "
    "WHERE queues.declared IS NULL OR queues.declared <> excluded.declared"
)
UPSERT_QUEUE_LIMITS = (
    "INSERT INTO queues (name, concurrency, per_worker, rate_count, rate_period, "
    "partition_concurrency, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET concurrency = excluded.concurrency, "
    "per_worker = excluded.per_worker, rate_count = excluded.rate_count, "
    "rate_period = excluded.rate_period, partition_concurrency = excluded.partition_concurrency, "
    "updated_at = excluded.updated_at"
)
SELECT_ACTIVE_DEDUP = (
    "SELECT run_id FROM runs WHERE COALESCE(queue, '') = ? AND dedup_key = ? "
    f"AND status NOT IN {FINISHED_SQL}"
)
# The earliest timer: when a worker with nothing else to do should look again.
NEXT_WAKE = (
    # One MIN per status: each is a single seek in runs_parked (an IN is not).
    "SELECT MIN(wake_at) FROM runs WHERE status = 'SLEEPING' AND wake_at IS NOT NULL "
    "UNION ALL SELECT MIN(wake_at) FROM runs WHERE status = 'WAITING' AND wake_at IS NOT NULL "
    "UNION ALL SELECT MIN(wake_at) FROM runs WHERE status = 'PENDING' AND wake_at IS NOT NULL"
)
# Parked runs whose timer is due or that received a message (wake_at set to now).
# Its columns are SELECT_PENDING's: both kinds of candidate pass the same queue gate.
SELECT_WOKEN = (
    "SELECT run_id, status, queue, partition_key, waiting_for, workflow, wake_at FROM runs "
    "WHERE status IN ('SLEEPING', 'WAITING') AND wake_at <= ? ORDER BY wake_at LIMIT ?"
)
ORPHAN_COLUMNS = (
    "run_id, recoveries, max_recoveries, workflow, owner, fence, execution, queue, "
    "partition_key, waiting_for"
)
# Whether a worker row's owner is alive, as a claimer judges it: not expired by a
# neighbour; and, for a claimer entitled to judge heartbeats (see SELECT_ORPHANED), with
# a heartbeat within the owner's own lease by the database's clock.
NOT_EXPIRED = "heartbeat_at > 0"
WITHIN_LEASE = f"heartbeat_at + lease >= {DB_NOW}"
# Runs whose owner is dead: it has no worker row, or was expired (a neighbour on its own
# machine saw its process gone). A worker never recovers its own runs: the reconciler
# deals with those.
SELECT_ORPHANED_DEAD = (
    f"SELECT {ORPHAN_COLUMNS} FROM runs "
    "WHERE status = 'RUNNING' AND "
    "(owner IS NULL OR (owner <> ? AND owner NOT IN "
    f"(SELECT worker_id FROM workers WHERE {NOT_EXPIRED}))) LIMIT ?"
)
# ... and also those whose owner's heartbeat is older than the owner's own lease, by the
# database's clock. Only a worker that has itself seen the database answer for a whole
# lease asks this (see runtime/leases.py): after an outage every heartbeat looks old.
SELECT_ORPHANED = (
    f"SELECT {ORPHAN_COLUMNS} FROM runs "
    "WHERE status = 'RUNNING' AND "
    "(owner IS NULL OR (owner <> ? AND owner NOT IN "
    f"(SELECT worker_id FROM workers WHERE {WITHIN_LEASE}))) LIMIT ?"
)


def owners_alive(count: int, *, stale: bool) -> str:
    """The rows of `count` workers (params: their ids), each with whether it is alive.

    A claim reads its orphans' owners again with this, once it holds the runs, with every
    row locked (FOR SHARE on PostgreSQL, see programs/orphans.py `still_orphaned`): it
    must lock the dead owners' rows too, so the liveness is a column, not a filter.
    """
    alive = WITHIN_LEASE if stale else NOT_EXPIRED
    return (
        f"SELECT worker_id, CASE WHEN {alive} THEN 1 ELSE 0 END FROM workers "
        f"WHERE worker_id IN ({placeholders(count)})"
    )


# Params: owner, attempt increment, recoveries increment, now, now, now, the start the
# queue's rate counts (now, or None for a wake-up or recovery), run_id, expected status.
# A sleeper waking is the same execution going on, so its attempt does not grow; every
# claim bumps the fence. A run created after the claimer read its clock (by another
# process, yet seen by the claim's query) starts when it was created, never before.
CLAIM_ONE = (
    "UPDATE runs SET status = 'RUNNING', owner = ?, attempt = attempt + ?, "
    "recoveries = recoveries + ?, "
    "started_at = COALESCE(started_at, CASE WHEN created_at > ? THEN created_at ELSE ? END), "
    "updated_at = ?, counted_start_at = COALESCE(?, counted_start_at), claim_woke = ?, "
    "wake_at = NULL, waiting_for = NULL, fence = fence + 1 WHERE run_id = ? AND (status || '') = ?"
)


def claim_many(count: int) -> str:
    """CLAIM_ONE for `count` runs of one status in one statement, returning the ids claimed.

    Params: CLAIM_ONE's first eight (owner, attempt and recoveries increments, now x3,
    the counted start, whether it wakes the runs), the `count` run ids, then the status.
    A claim of many runs is then one round trip, not one per run: the candidates are
    already locked by this transaction.
    """
    return for_runs(CLAIM_ONE, count) + " RETURNING run_id"


# A run takes the version of the code that first runs it: one queued by name (no code at
# hand), or by a process on other code (a web app not yet redeployed). Its history will be
# that code's, and a worker of another version hands it back rather than replay it
# (core/signals.py OtherVersion). Once it has history, its version stays.
SET_VERSION = (
    "UPDATE runs SET version = ? WHERE run_id = ? AND (version IS NULL OR "
    "NOT EXISTS (SELECT 1 FROM steps WHERE steps.run_id = runs.run_id))"
)

# A step the dead owner had in flight, as an interrupted attempt: unless its outcome or
# this attempt's failure made it to the journal after all. Params: the attempt's values
# (ATTEMPT_FIELDS order), then run_id, key.
INSERT_INTERRUPTED = (
    f"INSERT INTO step_attempts ({ATTEMPT_COLUMNS}) "
    f"SELECT {placeholders(len(ATTEMPT_FIELDS))} "
    "WHERE NOT EXISTS (SELECT 1 FROM steps WHERE run_id = ? AND key = ?) "
    "ON CONFLICT (run_id, execution, key, attempt) DO NOTHING"
)
# The runs the end of run ? writes besides itself (runs.after_finish): its parent, told
# of the end, and its unfinished children, cancelled. Params: run_id, run_id.
SELECT_RELATIVES = (
    "SELECT run_id FROM runs WHERE run_id = (SELECT parent_id FROM runs WHERE run_id = ?) "
    f"OR (parent_id = ? AND detached = 0 AND status NOT IN {FINISHED_SQL})"
)
POISON_ONE = (
    "UPDATE runs SET status = 'FAILED', error = ?, owner = NULL, updated_at = ?, "
    "finished_at = ? WHERE run_id = ? AND (status || '') = 'RUNNING'"
)
