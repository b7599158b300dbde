"""Workers: registration, heartbeats, liveness, the workflows they know, release."""

from __future__ import annotations

from cairn.models import SPINNING_AFTER
from cairn.store._sql.columns import DB_NOW, FENCE, UNFINISHED_SQL, WORKER_COLUMNS

# Registered and heartbeated with the database's clock (started_at and heartbeat_at).
# Params: worker_id, host, pid, concurrency, queues, workflows, lease, process, executing,
# versions.
UPSERT_WORKER = (
    "INSERT INTO workers (worker_id, host, pid, started_at, heartbeat_at, concurrency, "
    "queues, workflows, lease, process, executing, versions) "
    f"VALUES (?, ?, ?, {DB_NOW}, {DB_NOW}, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, "
    "concurrency = excluded.concurrency, queues = excluded.queues, "
    "workflows = excluded.workflows, lease = excluded.lease, process = excluded.process, "
    "executing = excluded.executing, versions = excluded.versions"
)
# A beat also says which steps the worker has in flight (store/in_flight.py): the same
# row, the same write. Params: executing, worker_id.
HEARTBEAT = f"UPDATE workers SET heartbeat_at = {DB_NOW}, executing = ? WHERE worker_id = ?"
SELECT_WORKERS = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at"
SELECT_WORKER = f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = ?"
SELECT_WORKER_EXECUTING = "SELECT executing FROM workers WHERE worker_id = ?"
# What a heartbeat reads back: the runs its worker holds, for the reconciler.
# Read at scrape time by the metrics (runs_by_status_created holds the statuses it counts).
COUNT_UNFINISHED = (
    "SELECT queue, status, COUNT(*), "
    f"SUM(CASE WHEN futile_wakes > {SPINNING_AFTER} THEN 1 ELSE 0 END) FROM runs "
    f"WHERE status IN {UNFINISHED_SQL} "
    "GROUP BY queue, status"
)
COUNT_LIVE_WORKERS = f"SELECT COUNT(*) FROM workers WHERE heartbeat_at + lease >= {DB_NOW}"
SELECT_OWNED = "SELECT run_id, fence FROM runs WHERE owner = ? AND status = 'RUNNING'"
# The same runs in the one order every lock of several runs takes (by run_id): locked
# by a beat that registers its worker again, and ahead of RELEASE_OWNED.
SELECT_OWNED_IN_ORDER = SELECT_OWNED + " ORDER BY run_id"
# Declared dead: heartbeat_at 0 (its runs may be taken over at once); the heartbeat it
# last wrote stays in last_heartbeat_at, for people. Expiring it again changes nothing.
EXPIRE_WORKER = (
    "UPDATE workers SET last_heartbeat_at = heartbeat_at, heartbeat_at = 0 "
    "WHERE worker_id = ? AND heartbeat_at > 0"
)
DELETE_WORKER = "DELETE FROM workers WHERE worker_id = ?"
SELECT_WORKER_SEEN = "SELECT workflows, heartbeat_at FROM workers WHERE worker_id = ?"
# Workflows known lately: what workers seen within a window say, and what is remembered
# of workers gone since (known_workflows). Params: the window in seconds.
SELECT_RECENT_WORKER_WORKFLOWS = (
    f"SELECT workflows FROM workers WHERE heartbeat_at > 0 AND heartbeat_at >= {DB_NOW} - ?"
)
# The live workers other than one (heartbeat within their own lease, by the database's
# clock), with what they execute: who may take a run handed back for its version.
SELECT_LIVE_OTHERS_CODE = (
    "SELECT workflows, versions FROM workers WHERE worker_id <> ? AND heartbeat_at > 0 "
    f"AND heartbeat_at >= {DB_NOW} - lease"
)
SELECT_RECENT_WORKFLOWS = f"SELECT workflow FROM known_workflows WHERE seen_at >= {DB_NOW} - ?"
REMEMBER_CHUNK = 100  # workflows per statement
# What an engine with workers declares of each workflow it imports (the code wins), for
# runs started by name elsewhere. Params: workflow, queue, max_recoveries.
DECLARE_WORKFLOW = (
    "INSERT INTO known_workflows (workflow, seen_at, queue, max_recoveries) "
    f"VALUES (?, {DB_NOW}, ?, ?) "
    "ON CONFLICT (workflow) DO UPDATE SET queue = excluded.queue, "
    "max_recoveries = excluded.max_recoveries, seen_at = CASE "
    "WHEN excluded.seen_at > known_workflows.seen_at THEN excluded.seen_at "
    "ELSE known_workflows.seen_at END"
)
SELECT_DECLARED_WORKFLOW = "SELECT queue, max_recoveries FROM known_workflows WHERE workflow = ?"


def remember_workflows(count: int, *, seen: str = DB_NOW) -> str:
    """INSERT of `count` workflow names into known_workflows, each seen at `seen`.

    `seen` is SQL: the database's clock, or `?` (then each name's params are the name and
    its time). A time earlier than the one remembered does not move it back.
    """
    rows = ", ".join([f"(?, {seen})"] * count)
    return (
        f"INSERT INTO known_workflows (workflow, seen_at) VALUES {rows} "
        "ON CONFLICT (workflow) DO UPDATE SET seen_at = CASE "
        "WHEN excluded.seen_at > known_workflows.seen_at THEN excluded.seen_at "
        "ELSE known_workflows.seen_at END"
    )


# A run whose attempt ended early (the database was away too long, the engine stops) is
# handed back by its living worker: queued again, PENDING without an owner, for any
# worker to claim. Not an orphan, so it does not count as a recovery.
# Params: now, run_id, owner, fence.
RELEASE_ONE = (
    f"UPDATE runs SET status = 'PENDING', owner = NULL, updated_at = ? WHERE {FENCE} "
    "AND (status || '') = 'RUNNING'"
)
# ... saying what it waits for, if given (a worker with the key it was handed back for).
# Params: now, waiting_for or None, run_id, owner, fence.
RELEASE_ONE_FOR = (
    "UPDATE runs SET status = 'PENDING', owner = NULL, updated_at = ?, "
    "waiting_for = COALESCE(?, waiting_for) "
    f"WHERE {FENCE} AND (status || '') = 'RUNNING'"
)
# ... an attempt that wrote nothing: the run goes back as its claim found it. Claimed as
# it woke (claim_woke, set by the claim itself, so the worker's reconciler, resuming a
# run whose claim's reply was lost, decides alike): parked again, WAITING and due at ?,
# its attempt kept (that claim counted none). Otherwise PENDING, taking back the attempt
# its claim counted (a recovery it counted stays: max_recoveries is about dead owners).
# Params: now (updated_at), waiting_for or None, now (wake_at), run_id, owner, fence.
RELEASE_IDLE_FOR = (
    "UPDATE runs SET owner = NULL, updated_at = ?, waiting_for = COALESCE(?, waiting_for), "
    "status = CASE WHEN claim_woke = 1 THEN 'WAITING' ELSE 'PENDING' END, "
    "wake_at = CASE WHEN claim_woke = 1 THEN ? ELSE wake_at END, "
    "attempt = attempt - (CASE WHEN claim_woke = 0 AND attempt > 0 THEN 1 ELSE 0 END) "
    f"WHERE {FENCE} AND (status || '') = 'RUNNING'"
)
RELEASE_OWNED = (
    "UPDATE runs SET status = 'PENDING', owner = NULL, updated_at = ? "
    "WHERE owner = ? AND status = 'RUNNING'"
)
