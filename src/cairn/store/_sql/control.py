"""Operator control: cancel, pause, resume, retry, executions, copies, continue-as-new."""

from __future__ import annotations

from cairn.store._sql.columns import FENCE, FINISHED_SQL, RUN_COLUMNS, STEP_COLUMNS, placeholders
from cairn.store._sql.statement import Statement
from cairn.store.records import (
    EXECUTION_FIELDS,
)

# Operator control. A run that is executing gets `control` set and acts on it at its next
# durable point; a parked or pending one is changed here directly.
# The request is decided by the state read: the row stays locked until it is written.
SELECT_CONTROL_STATE = Statement(
    "SELECT status, attempt, owner, control FROM runs WHERE run_id = ?", lock="hold"
)
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
    "wake_at = ?, control = NULL, updated_at = ? WHERE run_id = ? AND (status || '') = 'PAUSED'"
)
SELECT_CONTROLLED = "SELECT run_id, control FROM runs WHERE owner = ? AND control IS NOT NULL"
# A run that has not started (queued, or paused before it started) has run no code: a
# cancel ends it at once. Not `attempt = 0` alone: a run handed back having written
# nothing takes its attempt back, and may have history from before: one an older cairn
# handed back (it took back the attempt its wake had not counted, before claims kept
# `claim_woke`).
UNSTARTED = (
    "status IN ('PENDING', 'PAUSED') AND attempt = 0 "
    "AND NOT EXISTS (SELECT 1 FROM steps WHERE steps.run_id = runs.run_id)"
)
SELECT_STARTED = "SELECT 1 FROM steps WHERE run_id = ? LIMIT 1"
# A parent's end cancels its attached children: one not started ends CANCELLED here, as
# if cancelled itself (no worker of its queue need come to end it); the others get the
# request, parked ones made due. (SET expressions all read the row as it was.)
CANCEL_CHILDREN = (
    f"UPDATE runs SET control = CASE WHEN {UNSTARTED} THEN NULL ELSE 'cancel' END, "
    "updated_at = ?, "
    f"finished_at = CASE WHEN {UNSTARTED} THEN ? ELSE finished_at END, "
    f"owner = CASE WHEN {UNSTARTED} THEN NULL ELSE owner END, "
    f"wake_at = CASE WHEN {UNSTARTED} THEN NULL "
    "WHEN status IN ('SLEEPING', 'WAITING', 'PAUSED') THEN ? ELSE wake_at END, "
    f"status = CASE WHEN {UNSTARTED} THEN 'CANCELLED' "
    "WHEN status = 'PAUSED' THEN 'WAITING' ELSE status END "
    f"WHERE parent_id = ? AND detached = 0 AND status NOT IN {FINISHED_SQL}"
)
SELECT_PARENT = "SELECT parent_id FROM runs WHERE run_id = ?"
# Retrying a FAILED run begins its next execution. A failed last entry moves out of the
# journal (so that its step runs again) into retried_steps (so that history keeps it);
# attempts stay, each with its execution.
SELECT_EXECUTION = "SELECT execution, error FROM runs WHERE run_id = ?"
LAST_STEP = "SELECT key, status, seq FROM steps WHERE run_id = ? ORDER BY seq DESC LIMIT 1"
# A child entry's stored end (the child's run id and status in it), to retry a failed one.
CHILD_END_OF_ENTRY = "SELECT result FROM steps WHERE run_id = ? AND key = ? AND kind = 'child'"
# The status of a run that is a child of the given parent (none: not its child).
SELECT_CHILD_STATUS = "SELECT status FROM runs WHERE run_id = ? AND parent_id = ?"
# The execution that recorded journal entry `seq`: the last one that began at or before it.
EXECUTION_OF_SEQ = (
    "SELECT MAX(execution) FROM run_executions WHERE run_id = ? AND cause = 'retry' "
    "AND from_seq <= ?"
)
REQUEUE_FAILED = (
    "UPDATE runs SET status = 'PENDING', error = NULL, result = NULL, finished_at = NULL, "
    "control = NULL, owner = NULL, wake_at = NULL, updated_at = ?, execution = execution + 1 "
    "WHERE run_id = ? AND (status || '') = 'FAILED'"
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
    f"VALUES ({placeholders(len(EXECUTION_FIELDS))})"
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
# The request a run going on as new has not met yet (None: none; no row: not held).
SELECT_HELD_CONTROL = f"SELECT control FROM runs WHERE {FENCE}"
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
