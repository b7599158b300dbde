"""Durable streams: the items of a run's named streams (see programs/streams.py)."""

from __future__ import annotations

import functools

from cairn.store._sql.columns import FENCE
from cairn.store._sql.statement import Statement

STREAM_COLUMNS = "run_id, name, seq, kind, step_key, attempt, claim, at_seq, value, created_at, n"


# Items appended after the stream's last item, in one statement, while the run is held
# (see `append_stream_items`). The last item is read once, for its seq and its writer.
_APPEND_HEAD = (
    f"INSERT INTO stream_chunks ({STREAM_COLUMNS}) "
    "SELECT ?, ?, COALESCE(last.seq, 0) + v.column1, v.column2, ?, ?, ?, "
    "CAST(? AS INTEGER), v.column3, ?, CAST(? AS INTEGER) + v.column1 "
    "FROM (SELECT 1 AS one) AS head LEFT JOIN (SELECT seq, step_key, attempt, claim, n "
    "FROM stream_chunks WHERE run_id = ? AND name = ? ORDER BY seq DESC LIMIT 1) AS last "
    "ON 1 = 1 CROSS JOIN (VALUES "
)
# ... unless the stream ends with an item of this writer numbered past `base`: this append
# was sent before, and committed although its reply was lost (a writer's appends take
# turns, and a run's stream writes too, so its own last item is the stream's last).
_NOT_STORED = (
    "NOT COALESCE(last.step_key = ? AND last.attempt = ? AND last.claim = ? AND last.n > ?, FALSE)"
)


@functools.lru_cache(maxsize=64)
def append_stream_items(count: int) -> Statement:
    """The statement appending `count` items after the stream's last seq.

    Params: run_id, name, step_key, attempt, claim, at_seq, created_at, base, run_id,
    name, then (i, kind, value) per item (i from 1), then FENCE's, then step_key,
    attempt, claim, base. `base`: how many items the writer (step_key, attempt,
    claim) appended before (its items are numbered base + i); NULL for a reset. It is
    fenced as a step's outcome is, stores nothing if it is stored already (`_NOT_STORED`),
    and tells the stream's readers at its commit.
    """
    rows = ", ".join(["(?, ?, ?)"] * count)
    return Statement(
        f"{_APPEND_HEAD}{rows}) AS v WHERE EXISTS (SELECT 1 FROM runs WHERE {FENCE}) "
        f"AND {_NOT_STORED}",
        fenced=True,
        tells_streams=True,
    )


# Workflow code's writes so far (its occurrences count them, so a replay writes none again).
STREAM_WORKFLOW_TOP = (
    "SELECT MAX(attempt) FROM stream_chunks WHERE run_id = ? AND name = ? AND step_key = '~stream'"
)
SELECT_STREAM_ITEMS = (
    "SELECT seq, kind, step_key, attempt, value, created_at FROM stream_chunks "
    "WHERE run_id = ? AND name = ? AND seq > ? ORDER BY seq LIMIT ?"
)
# One item of a writer, by its number (was an append whose reply was lost stored?).
SELECT_APPENDED = (
    "SELECT 1 FROM stream_chunks WHERE run_id = ? AND name = ? AND step_key = ? "
    "AND attempt = ? AND claim = ? AND n = ?"
)
SELECT_STREAM_NAMES = (
    "SELECT name, COUNT(*), MAX(seq) FROM stream_chunks WHERE run_id = ? "
    "GROUP BY name ORDER BY name"
)
# The writers of step `key` other than (attempt, claim) whose chunks are not void yet.
SELECT_UNVOIDED = (
    "SELECT DISTINCT c.name, c.attempt, c.claim FROM stream_chunks c "
    "WHERE c.run_id = ? AND c.step_key = ? AND c.kind = 'chunk' "
    "AND NOT (c.attempt = ? AND c.claim = ?) AND NOT EXISTS (SELECT 1 FROM stream_chunks r "
    "WHERE r.run_id = c.run_id AND r.name = c.name AND r.kind = 'reset' "
    "AND r.step_key = c.step_key AND r.attempt = c.attempt AND r.claim = c.claim)"
)
# The writers of steps with no outcome stored whose chunks are not void yet (their
# workers died, and the run ends without running those steps again).
SELECT_UNFINISHED_UNVOIDED = (
    "SELECT DISTINCT c.name, c.step_key, c.attempt, c.claim FROM stream_chunks c "
    "WHERE c.run_id = ? AND c.kind = 'chunk' AND c.step_key <> '~stream' "
    "AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.run_id = c.run_id AND s.key = c.step_key) "
    "AND NOT EXISTS (SELECT 1 FROM stream_chunks r "
    "WHERE r.run_id = c.run_id AND r.name = c.name AND r.kind = 'reset' "
    "AND r.step_key = c.step_key AND r.attempt = c.attempt AND r.claim = c.claim) "
    "ORDER BY c.name, c.step_key, c.claim, c.attempt"
)
# A fork keeps the streams of the steps it copies, and workflow code's writes before it.
COPY_STREAMS = (
    "INSERT INTO stream_chunks (run_id, name, seq, kind, step_key, attempt, claim, at_seq, "
    "value, created_at, n) SELECT ?, name, seq, kind, step_key, attempt, claim, at_seq, value, "
    "created_at, n FROM stream_chunks c WHERE c.run_id = ? AND ("
    "(c.step_key = '~stream' AND c.at_seq < ?) OR c.step_key IN "
    "(SELECT key FROM steps WHERE run_id = ?))"
)
