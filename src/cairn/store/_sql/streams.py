"""Durable streams: the items of a run's named streams (see programs/streams.py)."""

from __future__ import annotations

STREAM_COLUMNS = "run_id, name, seq, kind, step_key, attempt, claim, at_seq, value, created_at"
INSERT_STREAM_ITEM = (
    f"INSERT INTO stream_chunks ({STREAM_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def insert_stream_items(count: int) -> str:
    """INSERT_STREAM_ITEM for `count` rows in one statement (one round trip)."""
    return INSERT_STREAM_ITEM + ", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)" * (count - 1)


STREAM_TOP = "SELECT MAX(seq) FROM stream_chunks WHERE run_id = ? AND name = ?"
# Workflow code's writes so far (its occurrences count them, so a replay writes none again).
STREAM_WORKFLOW_TOP = (
    "SELECT MAX(attempt) FROM stream_chunks WHERE run_id = ? AND name = ? AND step_key = '~stream'"
)
SELECT_STREAM_ITEMS = (
    "SELECT seq, kind, step_key, attempt, value, created_at FROM stream_chunks "
    "WHERE run_id = ? AND name = ? AND seq > ? ORDER BY seq LIMIT ?"
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
# A fork keeps the streams of the steps it copies, and workflow code's writes before it.
COPY_STREAMS = (
    "INSERT INTO stream_chunks (run_id, name, seq, kind, step_key, attempt, claim, at_seq, "
    "value, created_at) SELECT ?, name, seq, kind, step_key, attempt, claim, at_seq, value, "
    "created_at FROM stream_chunks c WHERE c.run_id = ? AND ("
    "(c.step_key = '~stream' AND c.at_seq < ?) OR c.step_key IN "
    "(SELECT key FROM steps WHERE run_id = ?))"
)
# The writer still holds the run (PostgreSQL: FOR KEY SHARE, a takeover waits for the commit).
STREAM_HELD = "SELECT 1 FROM runs WHERE run_id = ? AND COALESCE(owner, '') = ? AND fence = ?"
# Tells other processes' readers (PostgreSQL: NOTIFY cairn_streams at the commit; SQLite's
# readers poll, and this statement does nothing there). Param: the payload.
STREAM_NOTIFY = "SELECT ?"
