"""Schedules and event triggers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cairn.store._sql.columns import placeholders
from cairn.store.records import (
    SCHEDULE_FIELDS,
    ScheduleRecord,
)

# Schedules. A tick is fired by moving `next_tick` on with a compare-and-set, so of any
# number of engines exactly one fires it.
SCHEDULE_COLUMNS = ", ".join(SCHEDULE_FIELDS)
INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) "
    f"VALUES ({placeholders(len(SCHEDULE_FIELDS))}) ON CONFLICT (schedule_id) DO NOTHING"
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
