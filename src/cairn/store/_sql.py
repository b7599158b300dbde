"""Dialect-neutral SQL text (with `?` placeholders) and row <-> record mapping."""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from typing import Any

from cairn.models import SPINNING_AFTER, UNKNOWN_ORIGIN, RunStatus
from cairn.store.records import (
    ATTEMPT_FIELDS,
    EXECUTION_FIELDS,
    HOOK_FIELDS,
    JOURNAL_FIELDS,
    RUN_FIELDS,
    SCHEDULE_FIELDS,
    STEP_FIELDS,
    TASK_FIELDS,
    WORKER_FIELDS,
    AttemptRecord,
    ExecutionRecord,
    HookRecord,
    Lease,
    RunQuery,
    RunRecord,
    ScheduleRecord,
    StepRecord,
    TaskRecord,
    WorkerRecord,
)

RUN_COLUMNS = ", ".join(RUN_FIELDS)
LISTED_RUN_COLUMNS = ", ".join(f"runs.{name}" for name in RUN_FIELDS)
STEP_COLUMNS = ", ".join(STEP_FIELDS)
ATTEMPT_COLUMNS = ", ".join(ATTEMPT_FIELDS)
WORKER_COLUMNS = ", ".join(WORKER_FIELDS)


def _placeholders(n: int) -> str:
    return ", ".join("?" * n)


INSERT_RUN = (
    f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({_placeholders(len(RUN_FIELDS))}) "
    "ON CONFLICT (run_id) DO NOTHING"
)
SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"
# A column row carries its run's created_at, so that a column filter reads its matches
# in the runs list's order (run_columns_by_value ends with created_at, run_id).
SELECT_RUN_CREATED = "SELECT created_at FROM runs WHERE run_id = ?"
INSERT_COLUMN = (
    "INSERT INTO run_columns (run_id, name, value, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value"
)

# The database's clock, in epoch seconds: PostgreSQL defines cairn_now() in migration 9,
# SQLite's connections from the machine's clock. Liveness is judged with it, never with
# the clocks of the workers being judged.
DB_NOW = "cairn_now()"

# Fencing: every write on behalf of an attempt is guarded, in the same statement, by its
# lease: the run's owner and its fence (bumped by every claim). An attempt whose run was
# taken over, or claimed again since it began, sees rowcount 0 and writes nothing.
FENCE = "run_id = ? AND owner = ? AND fence = ?"
TOUCH_OWNED = f"UPDATE runs SET updated_at = ? WHERE {FENCE}"
# A step is inserted only while its run is held by the writer's lease: one statement, no
# row rewrite of `runs` on the hot path. Params: the step's values, then run_id, owner,
# fence.
INSERT_STEP_OWNED = (
    f"INSERT INTO steps ({STEP_COLUMNS}) SELECT {_placeholders(len(STEP_FIELDS))} "
    f"WHERE EXISTS (SELECT 1 FROM runs WHERE {FENCE})"
)
INSERT_ATTEMPT = (
    f"INSERT INTO step_attempts ({ATTEMPT_COLUMNS}) "
    f"VALUES ({_placeholders(len(ATTEMPT_FIELDS))}) "
    "ON CONFLICT (run_id, execution, key, attempt) DO NOTHING"
)
FINISH_RUN = (
    "UPDATE runs SET status = ?, result = ?, error = ?, updated_at = ?, finished_at = ?, "
    f"owner = NULL, wake_at = NULL, waiting_for = NULL WHERE {FENCE}"
)
PARK_RUN = (
    "UPDATE runs SET status = ?, wake_at = ?, waiting_for = ?, waits_on = ?, futile_wakes = ?, "
    f"owner = NULL, updated_at = ? WHERE {FENCE}"
)
# After PARK_RUN: an operator request its worker had not acted on. A cancel makes the run
# due (it replays into Cancelled); a pause parks it PAUSED. Params: now, run_id.
PARKED_CONTROL = (
    "UPDATE runs SET status = CASE WHEN control = 'pause' THEN 'PAUSED' "
    "WHEN status = 'PAUSED' THEN 'WAITING' ELSE status END, "
    "wake_at = CASE WHEN control = 'cancel' THEN ? ELSE wake_at END, "
    "control = CASE WHEN control = 'pause' THEN NULL ELSE control END "
    "WHERE run_id = ? AND control IS NOT NULL AND owner IS NULL"
)
UPDATE_META = (
    "UPDATE runs SET columns = COALESCE(?, columns), progress = COALESCE(?, progress), "
    "updated_at = ? WHERE run_id = ?"
)
SELECT_COLUMNS = "SELECT name, value FROM run_columns WHERE run_id = ? ORDER BY name"


def columns_json(rows: Sequence[Sequence[Any]]) -> str:
    """The runs.columns JSON object from (name, JSON value) rows."""
    return json.dumps({name: json.loads(value) for name, value in rows}, sort_keys=True)


SELECT_JOURNAL = f"SELECT {', '.join(JOURNAL_FIELDS)} FROM steps WHERE run_id = ? ORDER BY seq"
SELECT_HISTORY = f"SELECT {STEP_COLUMNS} FROM steps WHERE run_id = ? ORDER BY seq"
JOURNAL_EXTENT = "SELECT COUNT(*), MAX(seq) FROM steps WHERE run_id = ?"
SELECT_ATTEMPTS = (
    f"SELECT {ATTEMPT_COLUMNS} FROM step_attempts WHERE run_id = ? ORDER BY execution, key, attempt"
)

# Registered and heartbeated with the database's clock (started_at and heartbeat_at).
# Params: worker_id, host, pid, concurrency, queues, workflows, lease, process, executing.
UPSERT_WORKER = (
    "INSERT INTO workers (worker_id, host, pid, started_at, heartbeat_at, concurrency, "
    "queues, workflows, lease, process, executing) "
    f"VALUES (?, ?, ?, {DB_NOW}, {DB_NOW}, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, "
    "concurrency = excluded.concurrency, queues = excluded.queues, "
    "workflows = excluded.workflows, lease = excluded.lease, process = excluded.process, "
    "executing = excluded.executing"
)
# A beat also says which steps the worker has in flight (store/in_flight.py): the same
# row, the same write. Params: executing, worker_id.
HEARTBEAT = f"UPDATE workers SET heartbeat_at = {DB_NOW}, executing = ? WHERE worker_id = ?"
SELECT_WORKERS = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at"
SELECT_WORKER = f"SELECT {WORKER_COLUMNS} FROM workers WHERE worker_id = ?"
SELECT_WORKER_EXECUTING = "SELECT executing FROM workers WHERE worker_id = ?"
# What a heartbeat reads back: the runs its worker holds, for the reconciler.
# Read at scrape time by the metrics (runs_by_status holds the statuses it counts).
COUNT_UNFINISHED = (
    "SELECT queue, status, COUNT(*), "
    f"SUM(CASE WHEN futile_wakes > {SPINNING_AFTER} THEN 1 ELSE 0 END) FROM runs "
    "WHERE status IN ('PENDING', 'RUNNING', 'SLEEPING', 'WAITING', 'PAUSED') "
    "GROUP BY queue, status"
)
COUNT_LIVE_WORKERS = f"SELECT COUNT(*) FROM workers WHERE heartbeat_at + lease >= {DB_NOW}"
SELECT_OWNED = "SELECT run_id, fence FROM runs WHERE owner = ? AND status = 'RUNNING'"
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
SELECT_RECENT_WORKFLOWS = f"SELECT workflow FROM known_workflows WHERE seen_at >= {DB_NOW} - ?"
REMEMBER_CHUNK = 100  # workflows per statement


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
    "AND status = 'RUNNING'"
)
RELEASE_OWNED = (
    "UPDATE runs SET status = 'PENDING', owner = NULL, updated_at = ? "
    "WHERE owner = ? AND status = 'RUNNING'"
)

# Writing a journal entry that may already exist as "waiting" (events, hooks, tasks).
UPSERT_STEP_OWNED = (
    INSERT_STEP_OWNED + " ON CONFLICT (run_id, key) DO UPDATE SET status = excluded.status, "
    "attempts = excluded.attempts, finished_at = excluded.finished_at, "
    "result = excluded.result, error = excluded.error"
)

# Messages: what waiting runs consume, oldest first per channel.
INSERT_MESSAGE = (
    "INSERT INTO messages (run_id, channel, payload, idempotency_key, created_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
SELECT_OLDEST_MESSAGE = (
    "SELECT id, payload FROM messages WHERE run_id = ? AND channel = ? AND consumed_by IS NULL "
    "ORDER BY id LIMIT 1"
)
CONSUME_MESSAGE = "UPDATE messages SET consumed_by = ? WHERE id = ? AND consumed_by IS NULL"


def json_members(array: str) -> str:
    """A subquery of the text members of JSON array `array` (a column or `?`).

    SQLite's form; PostgreSQL rewrites it (see dialect), as it does the placeholders.
    """
    return f"SELECT value FROM json_each({array})"


# Channels: a run's open waits consume messages of these (runs.waits_on, a JSON array).
# A run about to wait looks for a message on one of them (params: run_id, the array);
# without them (a run parked by code that did not say), for any message.
HAS_MESSAGES_ON = (
    "SELECT 1 FROM messages WHERE run_id = ? AND consumed_by IS NULL "
    f"AND channel IN ({json_members('?')}) LIMIT 1"
)
HAS_MESSAGES = "SELECT 1 FROM messages WHERE run_id = ? AND consumed_by IS NULL LIMIT 1"
# A mailbox takes several messages of a channel at once, oldest first (params: run_id,
# channel, limit); then marks exactly those consumed by its entry (params: the entry's
# key, run_id, channel, the ids as a JSON array of strings).
SELECT_OLDEST_MESSAGES = (
    "SELECT id, payload FROM messages WHERE run_id = ? AND channel = ? AND consumed_by IS NULL "
    "ORDER BY id LIMIT ?"
)
CONSUME_MESSAGES = (
    "UPDATE messages SET consumed_by = ? WHERE run_id = ? AND channel = ? "
    f"AND consumed_by IS NULL AND CAST(id AS TEXT) IN ({json_members('?')})"
)
SELECT_STATUS = "SELECT status, waits_on FROM runs WHERE run_id = ?"
# A message for a waiting run makes it due now if one of its waits takes the message (a
# run whose waits are not known takes any); it then replays and consumes the message.
# Params: now, run_id, the message's channel.
WAKE_WAITING = (
    "UPDATE runs SET wake_at = ? WHERE run_id = ? AND status = 'WAITING' "
    f"AND (waits_on IS NULL OR ? IN ({json_members('waits_on')}))"
)

HOOK_COLUMNS = ", ".join(HOOK_FIELDS)
INSERT_HOOK = (
    f"INSERT INTO hooks ({HOOK_COLUMNS}) VALUES ({_placeholders(len(HOOK_FIELDS))}) "
    "ON CONFLICT (token) DO NOTHING"
)
SELECT_HOOK = f"SELECT {HOOK_COLUMNS} FROM hooks WHERE token = ?"
USE_HOOK = (
    "UPDATE hooks SET used_at = ? WHERE token = ? AND used_at IS NULL "
    "AND (expires_at IS NULL OR expires_at > ?)"
)
SELECT_HOOK_RUN = "SELECT run_id FROM hooks WHERE token = ?"
# Hooks that can still be called: unused, unexpired, their run unfinished. An operator's
# look, not a hot path: no index of its own.
SELECT_OPEN_HOOKS = (
    "SELECT "
    + ", ".join(f"h.{name}" for name in HOOK_FIELDS)
    + " FROM hooks h JOIN runs r ON r.run_id = h.run_id "
    "WHERE h.used_at IS NULL AND (h.expires_at IS NULL OR h.expires_at > ?) "
    "AND r.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'CONTINUED') "
    "AND (CAST(? AS TEXT) IS NULL OR h.run_id = ?) "
    "ORDER BY h.created_at, h.token LIMIT ?"
)
SCHEMA_VERSION = "SELECT MAX(version) FROM cairn_migrations"

TASK_COLUMNS = ", ".join(TASK_FIELDS)
INSERT_TASK = (
    f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ({_placeholders(len(TASK_FIELDS))}) "
    "ON CONFLICT (task_id) DO NOTHING"
)
SELECT_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?"
SUBMIT_TASK = (
    "UPDATE tasks SET status = 'submitted', submitted_at = ?, submitted_by = ?, "
    "submitted_values = ? WHERE task_id = ? AND status = 'open'"
)
CLOSE_TASKS = (
    "UPDATE tasks SET status = ? WHERE run_id = ? AND status = 'open' "
    "AND (? IS NULL OR task_id = ?)"
)


def list_tasks(
    status: str | None, assignee: str | None, run_id: str | None
) -> tuple[str, list[Any]]:
    """SELECT text and parameters for tasks, oldest first."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("status", status), ("assignee", assignee), ("run_id", run_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {TASK_COLUMNS} FROM tasks"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql + " ORDER BY created_at, task_id", params


def hook_params(hook: HookRecord) -> tuple[Any, ...]:
    """The values of `hook` in HOOK_FIELDS order."""
    return tuple(getattr(hook, name) for name in HOOK_FIELDS)


def hook_from_row(row: Sequence[Any]) -> HookRecord:
    """A HookRecord from a row selected with HOOK_COLUMNS."""
    return HookRecord(*row)


def task_params(task: TaskRecord) -> tuple[Any, ...]:
    """The values of `task` in TASK_FIELDS order."""
    return tuple(getattr(task, name) for name in TASK_FIELDS)


def task_from_row(row: Sequence[Any]) -> TaskRecord:
    """A TaskRecord from a row selected with TASK_COLUMNS."""
    return TaskRecord(*row)


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
COUNT_STARTS = "SELECT COUNT(*) FROM runs WHERE queue = ? AND started_at >= ?"
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
    "AND status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED', 'CONTINUED')"
)
# The earliest timer: when a worker with nothing else to do should look again.
NEXT_WAKE = (
    # One MIN per status: each is a single seek in runs_parked (an IN is not).
    "SELECT MIN(wake_at) FROM runs WHERE status = 'SLEEPING' AND wake_at IS NOT NULL "
    "UNION ALL SELECT MIN(wake_at) FROM runs WHERE status = 'WAITING' AND wake_at IS NOT NULL "
    "UNION ALL SELECT MIN(wake_at) FROM runs WHERE status = 'PENDING' AND wake_at IS NOT NULL"
)
# Parked runs whose timer is due or that received a message (wake_at set to now).
SELECT_WOKEN = (
    "SELECT run_id, status, wake_at FROM runs WHERE status IN ('SLEEPING', 'WAITING') "
    "AND wake_at <= ? ORDER BY wake_at LIMIT ?"
)
# Runs whose owner is dead: it has no worker row, or was expired (a neighbour on its own
# machine saw its process gone). A worker never recovers its own runs: the reconciler
# deals with those.
SELECT_ORPHANED_DEAD = (
    "SELECT run_id, recoveries, max_recoveries, workflow, owner, fence, execution FROM runs "
    "WHERE status = 'RUNNING' AND "
    "(owner IS NULL OR (owner <> ? AND owner NOT IN "
    "(SELECT worker_id FROM workers WHERE heartbeat_at > 0))) LIMIT ?"
)
# ... and also those whose owner's heartbeat is older than the owner's own lease, by the
# database's clock. Only a worker that has itself seen the database answer for a whole
# lease asks this (see runtime/leases.py): after an outage every heartbeat looks old.
SELECT_ORPHANED = (
    "SELECT run_id, recoveries, max_recoveries, workflow, owner, fence, execution FROM runs "
    "WHERE status = 'RUNNING' AND "
    "(owner IS NULL OR (owner <> ? AND owner NOT IN "
    f"(SELECT worker_id FROM workers WHERE heartbeat_at + lease >= {DB_NOW}))) LIMIT ?"
)
# Params: owner, attempt increment, recoveries increment, now, now, now, run_id, expected
# status. A sleeper waking is the same execution going on, so its attempt does not grow;
# every claim bumps the fence. A run created after the claimer read its clock (by another
# process, yet seen by the claim's query) starts when it was created, never before.
CLAIM_ONE = (
    "UPDATE runs SET status = 'RUNNING', owner = ?, attempt = attempt + ?, "
    "recoveries = recoveries + ?, "
    "started_at = COALESCE(started_at, CASE WHEN created_at > ? THEN created_at ELSE ? END), "
    "updated_at = ?, "
    "wake_at = NULL, waiting_for = NULL, fence = fence + 1 WHERE run_id = ? AND status = ?"
)
# A run queued by name (no code at hand) takes the version of the code that first runs it.
SET_VERSION = "UPDATE runs SET version = ? WHERE run_id = ? AND version IS NULL"
# A step the dead owner had in flight, as an interrupted attempt: unless its outcome or
# this attempt's failure made it to the journal after all. Params: the attempt's values
# (ATTEMPT_FIELDS order), then run_id, key.
INSERT_INTERRUPTED = (
    f"INSERT INTO step_attempts ({ATTEMPT_COLUMNS}) "
    f"SELECT {_placeholders(len(ATTEMPT_FIELDS))} "
    "WHERE NOT EXISTS (SELECT 1 FROM steps WHERE run_id = ? AND key = ?) "
    "ON CONFLICT (run_id, execution, key, attempt) DO NOTHING"
)
POISON_ONE = (
    "UPDATE runs SET status = 'FAILED', error = ?, owner = NULL, updated_at = ?, "
    "finished_at = ? WHERE run_id = ? AND status = 'RUNNING'"
)


# Operator control. A run that is executing gets `control` set and acts on it at its next
# durable point; a parked or pending one is changed here directly.
FINISHED_SQL = "('COMPLETED', 'FAILED', 'CANCELLED', 'CONTINUED')"
SELECT_CONTROL_STATE = "SELECT status, attempt, owner FROM runs WHERE run_id = ?"
SET_CONTROL = "UPDATE runs SET control = ?, updated_at = ? WHERE run_id = ?"
# Parked runs are made due so they replay and meet the request at their durable point.
SET_CONTROL_AND_WAKE = "UPDATE runs SET control = ?, wake_at = ?, updated_at = ? WHERE run_id = ?"
CANCEL_UNSTARTED = (
    "UPDATE runs SET status = 'CANCELLED', control = NULL, owner = NULL, wake_at = NULL, "
    "updated_at = ?, finished_at = ? WHERE run_id = ?"
)
PAUSE_PARKED = "UPDATE runs SET status = 'PAUSED', control = NULL, updated_at = ? WHERE run_id = ?"
# A resumed run replays from its journal, so remaining sleeps and queued events carry on.
RESUME_PAUSED = (
    "UPDATE runs SET status = CASE WHEN attempt = 0 THEN 'PENDING' ELSE 'WAITING' END, "
    "wake_at = ?, control = NULL, updated_at = ? WHERE run_id = ? AND status = 'PAUSED'"
)
SELECT_CONTROLLED = "SELECT run_id, control FROM runs WHERE owner = ? AND control IS NOT NULL"
CANCEL_CHILDREN = (
    "UPDATE runs SET control = 'cancel', updated_at = ?, "
    "wake_at = CASE WHEN status IN ('SLEEPING', 'WAITING', 'PAUSED') THEN ? ELSE wake_at END, "
    "status = CASE WHEN status = 'PAUSED' THEN 'WAITING' ELSE status END "
    f"WHERE parent_id = ? AND detached = 0 AND status NOT IN {FINISHED_SQL}"
)
SELECT_PARENT = "SELECT parent_id FROM runs WHERE run_id = ?"
# Retrying a FAILED run begins its next execution. A failed last entry moves out of the
# journal (so that its step runs again) into retried_steps (so that history keeps it);
# attempts stay, each with its execution.
SELECT_EXECUTION = "SELECT execution FROM runs WHERE run_id = ?"
LAST_STEP = "SELECT key, status, seq FROM steps WHERE run_id = ? ORDER BY seq DESC LIMIT 1"
# The execution that recorded journal entry `seq`: the last one that began at or before it.
EXECUTION_OF_SEQ = (
    "SELECT MAX(execution) FROM run_executions WHERE run_id = ? AND cause = 'retry' "
    "AND from_seq <= ?"
)
REQUEUE_FAILED = (
    "UPDATE runs SET status = 'PENDING', error = NULL, result = NULL, finished_at = NULL, "
    "control = NULL, owner = NULL, wake_at = NULL, updated_at = ?, execution = execution + 1 "
    "WHERE run_id = ? AND status = 'FAILED'"
)
# retried_steps has every column of steps (plus execution): a migration that adds one to
# steps adds it there too.
RETIRE_STEP = (
    f"INSERT INTO retried_steps (execution, {STEP_COLUMNS}) SELECT ?, {STEP_COLUMNS} "
    "FROM steps WHERE run_id = ? AND key = ?"
)
DELETE_STEP = "DELETE FROM steps WHERE run_id = ? AND key = ?"
EXECUTION_COLUMNS = ", ".join(EXECUTION_FIELDS)
INSERT_EXECUTION = (
    f"INSERT INTO run_executions ({EXECUTION_COLUMNS}) "
    f"VALUES ({_placeholders(len(EXECUTION_FIELDS))})"
)
SELECT_EXECUTIONS = (
    f"SELECT {EXECUTION_COLUMNS} FROM run_executions WHERE run_id = ? ORDER BY execution"
)
SELECT_RETRIED = (
    f"SELECT execution, {STEP_COLUMNS} FROM retried_steps WHERE run_id = ? ORDER BY execution, seq"
)
# The runs restarted or forked from a run (two partial indexes, one per column).
SELECT_COPIES = (
    f"SELECT {RUN_COLUMNS} FROM runs WHERE restarted_from = ? "
    f"UNION ALL SELECT {RUN_COLUMNS} FROM runs WHERE forked_from = ? "
    "ORDER BY created_at, run_id"
)
COPY_STEPS = (
    f"INSERT INTO steps ({STEP_COLUMNS}) SELECT ?, {STEP_COLUMNS.replace('run_id, ', '', 1)} "
    "FROM steps WHERE run_id = ? AND seq < ? AND status <> 'waiting'"
)
CONTINUE_RUN = (
    "UPDATE runs SET status = 'CONTINUED', continued_to = ?, result = NULL, owner = NULL, "
    f"wake_at = NULL, updated_at = ?, finished_at = ? WHERE {FENCE}"
)

# Events a run that continues as new has not taken pass to its successor (an event sent
# later follows the chain too). Params: the successor's run_id, the run's.
PASS_ON_EVENTS = (
    "UPDATE messages SET run_id = ? WHERE run_id = ? AND consumed_by IS NULL "
    "AND channel LIKE 'event:%'"
)


def child_message(run_id: str, status: str, result: str | None, error: str | None) -> str:
    """What a finished child tells its parent (consumed by the parent's wait)."""
    return json.dumps({"run_id": run_id, "status": status, "result": result, "error": error})


_RUN_VALUES = operator.attrgetter(*RUN_FIELDS)


def run_params(run: RunRecord) -> tuple[Any, ...]:
    """The values of `run` in RUN_FIELDS order."""
    values: tuple[Any, ...] = _RUN_VALUES(run)
    return values


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A RunRecord from a row selected with RUN_COLUMNS."""
    return RunRecord(*row)


def step_params(step: StepRecord, lease: Lease | None = None) -> tuple[Any, ...]:
    """The values of `step` in STEP_FIELDS order; then its run's id and `lease`, if given.

    (With a lease: the parameters of INSERT_STEP_OWNED, built as one tuple per step.)
    """
    if lease is not None:
        return (
            step.run_id,
            step.seq,
            step.key,
            step.kind,
            step.name,
            step.status,
            step.attempts,
            step.started_at,
            step.finished_at,
            step.result,
            step.error,
            step.input,
            step.run_id,
            lease.owner,
            lease.fence,
        )
    return (
        step.run_id,
        step.seq,
        step.key,
        step.kind,
        step.name,
        step.status,
        step.attempts,
        step.started_at,
        step.finished_at,
        step.result,
        step.error,
        step.input,
    )


def step_from_row(row: Sequence[Any]) -> StepRecord:
    """A StepRecord from a row of SELECT_JOURNAL (input None) or SELECT_HISTORY."""
    return StepRecord(*row)


def attempt_params(attempt: AttemptRecord) -> tuple[Any, ...]:
    """The values of `attempt` in ATTEMPT_FIELDS order."""
    return tuple(getattr(attempt, name) for name in ATTEMPT_FIELDS)


def attempt_from_row(row: Sequence[Any]) -> AttemptRecord:
    """An AttemptRecord from a row selected with ATTEMPT_COLUMNS."""
    return AttemptRecord(*row)


def worker_params(worker: WorkerRecord) -> tuple[Any, ...]:
    """The parameters of UPSERT_WORKER for `worker` (its times come from the database)."""
    return (
        worker.worker_id,
        worker.host,
        worker.pid,
        worker.concurrency,
        worker.queues,
        worker.workflows,
        worker.lease,
        worker.process,
        worker.executing,
    )


def execution_from_row(row: Sequence[Any]) -> ExecutionRecord:
    """An ExecutionRecord from a row selected with EXECUTION_COLUMNS."""
    return ExecutionRecord(*row)


def worker_from_row(row: Sequence[Any]) -> WorkerRecord:
    """A WorkerRecord from a row selected with WORKER_COLUMNS."""
    return WorkerRecord(*row)


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


def count_runs(query: RunQuery, limit: int | None = None) -> tuple[str, list[Any]]:
    """SELECT (status, count) rows of the runs `query` matches whatever their status.

    One query over the same filters as `list_runs` (its status, cursor and limit aside):
    the runs page's count per status. With `limit` (see Store.count_runs), a query with
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


# Schedules. A tick is fired by moving `next_tick` on with a compare-and-set, so of any
# number of engines exactly one fires it.
SCHEDULE_COLUMNS = ", ".join(SCHEDULE_FIELDS)
INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) "
    f"VALUES ({_placeholders(len(SCHEDULE_FIELDS))}) ON CONFLICT (schedule_id) DO NOTHING"
)
SELECT_SCHEDULE = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE schedule_id = ?"
SELECT_SCHEDULES = f"SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY schedule_id"
UPDATE_SCHEDULE_DEFINITION = (
    "UPDATE schedules SET workflow = ?, cron = ?, every = ?, tz = ?, overlap = ?, "
    "catchup = ?, args = ?, queue = ?, max_recoveries = ?, source = ?, next_tick = ?, "
    "updated_at = ? WHERE schedule_id = ?"
)
# Pausing drops a buffered tick; resuming sets the next tick (no catch-up of the pause).
SET_SCHEDULE_PAUSED = (
    "UPDATE schedules SET paused = ?, next_tick = COALESCE(?, next_tick), "
    "buffered_tick = NULL, updated_at = ? WHERE schedule_id = ?"
)
DELETE_SCHEDULE = "DELETE FROM schedules WHERE schedule_id = ?"
SELECT_DUE_SCHEDULES = (
    f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE paused = 0 "
    "AND (next_tick <= ? OR buffered_tick IS NOT NULL) ORDER BY next_tick LIMIT ?"
)
NEXT_SCHEDULE_TICK = "SELECT MIN(next_tick) FROM schedules WHERE paused = 0"
ADVANCE_SCHEDULE = (
    "UPDATE schedules SET next_tick = ?, updated_at = ? "
    "WHERE schedule_id = ? AND next_tick = ? AND paused = 0"
)
SET_SCHEDULE_STATE = (
    "UPDATE schedules SET buffered_tick = ?, last_run_id = ?, updated_at = ? WHERE schedule_id = ?"
)
SET_SCHEDULE_LAST_RUN = "UPDATE schedules SET last_run_id = ?, updated_at = ? WHERE schedule_id = ?"
TAKE_BUFFERED = (
    "UPDATE schedules SET buffered_tick = NULL, updated_at = ? "
    "WHERE schedule_id = ? AND buffered_tick = ? AND paused = 0"
)
SELECT_RUN_CHAIN = "SELECT status, continued_to FROM runs WHERE run_id = ?"


def schedule_params(schedule: ScheduleRecord) -> tuple[Any, ...]:
    """The values of `schedule` in SCHEDULE_FIELDS order."""
    return tuple(getattr(schedule, name) for name in SCHEDULE_FIELDS)


def schedule_from_row(row: Sequence[Any]) -> ScheduleRecord:
    """A ScheduleRecord from a row selected with SCHEDULE_COLUMNS."""
    return ScheduleRecord(*row)


# Event triggers: which workflows an event type starts, and the run ids of keyed emits.
UPSERT_SUBSCRIPTION = (
    "INSERT INTO subscriptions (event_type, workflow, queue, max_recoveries, updated_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (event_type, workflow) DO UPDATE SET "
    "queue = excluded.queue, max_recoveries = excluded.max_recoveries, "
    "updated_at = excluded.updated_at"
)
DELETE_SUBSCRIPTIONS = "DELETE FROM subscriptions WHERE workflow = ?"
DELETE_OTHER_SUBSCRIPTIONS = "DELETE FROM subscriptions WHERE workflow = ? AND event_type <> ?"
SELECT_SUBSCRIBERS = (
    "SELECT event_type, workflow, queue, max_recoveries FROM subscriptions "
    "WHERE event_type = ? ORDER BY workflow"
)
SELECT_SUBSCRIPTIONS = (
    "SELECT event_type, workflow, queue, max_recoveries FROM subscriptions "
    "ORDER BY event_type, workflow"
)
SELECT_EMIT_KEY = "SELECT run_ids FROM emit_keys WHERE event_type = ? AND key = ?"
INSERT_EMIT_KEY = (
    "INSERT INTO emit_keys (event_type, key, run_ids, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (event_type, key) DO NOTHING"
)
