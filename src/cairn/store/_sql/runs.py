"""A run's own rows and its journal: create, finish, park, describe, steps, attempts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cairn.store._sql.columns import (
    ATTEMPT_COLUMNS,
    FENCE,
    FINISHED_SQL,
    RUN_COLUMNS,
    STEP_COLUMNS,
    placeholders,
)
from cairn.store._sql.statement import Statement
from cairn.store.records import (
    ATTEMPT_FIELDS,
    JOURNAL_FIELDS,
    RUN_FIELDS,
    STEP_FIELDS,
)

INSERT_RUN = Statement(
    f"INSERT INTO runs ({RUN_COLUMNS}) VALUES ({placeholders(len(RUN_FIELDS))}) "
    "ON CONFLICT (run_id) DO NOTHING",
    bulk_keys=("run_id",),
)
SELECT_RUN = f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?"
# A column row carries its run's created_at, so that a column filter reads its matches
# in the runs list's order (run_columns_by_value ends with created_at, run_id).
SELECT_RUN_CREATED = "SELECT created_at FROM runs WHERE run_id = ?"
INSERT_COLUMN = (
    "INSERT INTO run_columns (run_id, name, value, created_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value"
)

TOUCH_OWNED = f"UPDATE runs SET updated_at = ? WHERE {FENCE}"
# A step is inserted only while its run is held by the writer's lease: one statement, no
# row rewrite of `runs` on the hot path. Params: the step's values, then run_id, owner,
# fence.
INSERT_STEP_OWNED = Statement(
    f"INSERT INTO steps ({STEP_COLUMNS}) SELECT {placeholders(len(STEP_FIELDS))} "
    f"WHERE EXISTS (SELECT 1 FROM runs WHERE {FENCE})",
    fenced=True,
    bulk_keys=("run_id", "key"),
)
INSERT_ATTEMPT = (
    f"INSERT INTO step_attempts ({ATTEMPT_COLUMNS}) "
    f"VALUES ({placeholders(len(ATTEMPT_FIELDS))}) "
    "ON CONFLICT (run_id, execution, key, attempt) DO NOTHING"
)
# Every run the end of run ? writes (runs.after_finish): itself, its parent (told of the
# end) and its unfinished children (cancelled), in the one order every lock of several
# runs takes (by run_id). Params: run_id, run_id, run_id.
SELECT_FAMILY = (
    "SELECT run_id FROM runs WHERE run_id = ? "
    "OR run_id = (SELECT parent_id FROM runs WHERE run_id = ?) "
    f"OR (parent_id = ? AND detached = 0 AND status NOT IN {FINISHED_SQL}) ORDER BY run_id"
)
FINISH_RUN = Statement(
    "UPDATE runs SET status = ?, result = ?, error = ?, updated_at = ?, finished_at = ?, "
    f"owner = NULL, wake_at = NULL, waiting_for = NULL WHERE {FENCE}",
    bulk_keys=("run_id",),
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
# What a run waits for while an attempt of it executes: the blob store, say (a RUNNING
# run has no `waiting_for` otherwise; the next claim, park or end clears it). Params:
# the note (or NULL), run_id, owner, fence.
NOTE_HELD = f"UPDATE runs SET waiting_for = ? WHERE {FENCE}"
# The same for a run parked on an attempt another worker executes (a step queue's): the
# note stands in for `waiting_for` while that is still what the run parked with.
# Params: the note, run_id, what it parked with.
NOTE_PARKED = (
    "UPDATE runs SET waiting_for = ? WHERE run_id = ? AND (status || '') = 'WAITING' "
    "AND waiting_for = ?"
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
