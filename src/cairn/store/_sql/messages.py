"""What waiting runs consume: messages and channels, hooks and human tasks."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from cairn.store import texts
from cairn.store._sql.columns import FINISHED_SQL, placeholders
from cairn.store._sql.listing import run_tree
from cairn.store._sql.runs import INSERT_STEP_OWNED
from cairn.store._sql.statement import Statement, json_members
from cairn.store.records import (
    HOOK_FIELDS,
    TASK_FIELDS,
    HookRecord,
    TaskRecord,
)

# Writing a journal entry that may already exist as "waiting" (events, hooks, tasks).
UPSERT_STEP_OWNED = Statement(
    INSERT_STEP_OWNED + " ON CONFLICT (run_id, key) DO UPDATE SET status = excluded.status, "
    "attempts = excluded.attempts, finished_at = excluded.finished_at, "
    "result = excluded.result, error = excluded.error",
    fenced=True,
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
# A sender's retry: is this (run, channel, key) already stored? (messages_idempotency)
SELECT_MESSAGE_KEY = (
    "SELECT 1 FROM messages WHERE run_id = ? AND channel = ? AND idempotency_key = ?"
)
CONSUME_MESSAGE = "UPDATE messages SET consumed_by = ? WHERE id = ? AND consumed_by IS NULL"


# Channels: a run's open waits consume messages of these (runs.waits_on, a JSON array).
# A run about to wait looks for a message on one of them (params: run_id, the array);
# without them (a run parked by code that did not say), for any message. The run is locked
# first, so that a message queued meanwhile (WAKE_WAITING locks it too) is seen or wakes it.
HAS_MESSAGES_ON = Statement(
    "SELECT 1 FROM messages WHERE run_id = ? AND consumed_by IS NULL "
    f"AND channel IN ({json_members('?')}) LIMIT 1",
    locks_run=0,
    json_arrays=("?",),
)
HAS_MESSAGES = Statement(
    "SELECT 1 FROM messages WHERE run_id = ? AND consumed_by IS NULL LIMIT 1", locks_run=0
)
# A mailbox takes several messages of a channel at once, oldest first (params: run_id,
# channel, limit); then marks exactly those consumed by its entry (params: the entry's
# key, run_id, channel, the ids as a JSON array of strings).
SELECT_OLDEST_MESSAGES = (
    "SELECT id, payload FROM messages WHERE run_id = ? AND channel = ? AND consumed_by IS NULL "
    "ORDER BY id LIMIT ?"
)
CONSUME_MESSAGES = Statement(
    "UPDATE messages SET consumed_by = ? WHERE run_id = ? AND channel = ? "
    f"AND consumed_by IS NULL AND CAST(id AS TEXT) IN ({json_members('?')})",
    json_arrays=("?",),
)
# A sender reads the run's status and waits, then writes by them: the row stays locked.
# The head of its arguments says whether the run's values are encrypted (codecs/sealed.py).
SELECT_STATUS = Statement(
    "SELECT status, waits_on, substr(args, 1, 80) FROM runs WHERE run_id = ?", lock="hold"
)
# A message for a waiting run makes it due now if one of its waits takes the message (a
# run whose waits are not known takes any); it then replays and consumes the message.
# Params: now, run_id, the message's channel. The run is locked first (see HAS_MESSAGES_ON).
WAKE_WAITING = Statement(
    "UPDATE runs SET wake_at = ? WHERE run_id = ? AND (status || '') = 'WAITING' "
    f"AND (waits_on IS NULL OR ? IN ({json_members('waits_on')}))",
    locks_run=1,
    json_arrays=("waits_on",),
)

HOOK_COLUMNS = ", ".join(HOOK_FIELDS)
INSERT_HOOK = (
    f"INSERT INTO hooks ({HOOK_COLUMNS}) VALUES ({placeholders(len(HOOK_FIELDS))}) "
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
    f"AND r.status NOT IN {FINISHED_SQL} "
    "AND (CAST(? AS TEXT) IS NULL OR h.run_id = ?) "
    "ORDER BY h.created_at, h.token LIMIT ?"
)
SCHEMA_VERSION = "SELECT MAX(version) FROM cairn_migrations"

TASK_COLUMNS = ", ".join(TASK_FIELDS)
INSERT_TASK = (
    f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ({placeholders(len(TASK_FIELDS))}) "
    "ON CONFLICT (task_id) DO NOTHING"
)
SELECT_TASK = f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?"
SUBMIT_TASK = (
    "UPDATE tasks SET status = 'submitted', submitted_at = ?, submitted_by = ?, "
    "submitted_values = ? WHERE task_id = ? AND status = 'open'"
)
CLOSE_TASKS = (
    "UPDATE tasks SET status = ? WHERE run_id = ? AND status = 'open' "
    "AND (CAST(? AS TEXT) IS NULL OR task_id = ?)"  # typed: PostgreSQL cannot type `? IS NULL`
)


def list_tasks(
    status: str | None, assignee: str | None, run_id: str | None, descendants: bool = False
) -> tuple[str, list[Any]]:
    """SELECT text and parameters for tasks, oldest first.

    With `descendants`, `run_id` keeps the tasks of that run and of its descendants.
    """
    where: list[str] = []
    params: list[Any] = []
    assignee = texts.stored_or_none(assignee)  # compared as stored
    for column, value in (("status", status), ("assignee", assignee), ("run_id", run_id)):
        if value is not None:
            where.append(
                run_tree(column) if column == "run_id" and descendants else f"{column} = ?"
            )
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


# A task's free texts, from the workflow or the person submitting: escaped (see texts).
_TASK_TEXTS = frozenset({"title", "assignee", "submitted_by"})


def task_params(task: TaskRecord) -> tuple[Any, ...]:
    """The values of `task` in TASK_FIELDS order, its texts escaped."""
    return tuple(
        texts.stored_or_none(value) if name in _TASK_TEXTS else value
        for name in TASK_FIELDS
        for value in (getattr(task, name),)
    )


def task_from_row(row: Sequence[Any]) -> TaskRecord:
    """A TaskRecord from a row selected with TASK_COLUMNS, its texts unescaped."""
    task = TaskRecord(*row)
    return dataclasses.replace(
        task,
        title=texts.loaded(task.title),
        assignee=texts.loaded_or_none(task.assignee),
        submitted_by=texts.loaded_or_none(task.submitted_by),
    )
