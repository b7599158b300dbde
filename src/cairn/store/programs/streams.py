"""Programs of durable streams: appending a run's stream items, voiding attempts, reading.

What the items mean to writers and readers is core/streams.py's and runtime/streams.py's;
here they are rows, numbered per stream (run, name) by `seq`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cairn.store import _sql
from cairn.store.programs.base import Program, Sql, all_rows, operation, path, single_write
from cairn.store.protocol import LeaseLost
from cairn.store.records import Lease, StreamItem

WORKFLOW_KEY = "~stream"
"""The step_key of items written by workflow code (not by a step)."""


def noticed(payload: str) -> tuple[str, str] | None:
    """(run_id, name) of a NOTIFY cairn_streams payload; None if it is not one.

    The payload is a JSON [run_id, name], sent by each append on PostgreSQL (see
    postgres/dialect.py).
    """
    try:
        run_id, name = json.loads(payload)
    except (ValueError, TypeError):
        return None
    return str(run_id), str(name)


@operation
@single_write
@path("one")
def append_stream(
    lease: Lease,
    run_id: str,
    name: str,
    items: Sequence[tuple[str, str | None]],
    *,
    step_key: str,
    attempt: int,
    claim: int,
    at_seq: int | None = None,
    base: int,
    now: float,
) -> Program[int]:
    """Append (kind, value) items to stream `name` of the run held by `lease`; how many.

    One statement, after the stream's last seq. `base`: how many items this writer (the
    step attempt `step_key`, `attempt` in claim `claim`) appended before. Raises
    LeaseLost if the run is not held, or if the items are stored already: this append
    was sent before and committed although its reply was lost, so that a resend stores
    nothing twice (`appended` then tells the writer that its items are in).
    """
    params: list[object] = [run_id, name, step_key, attempt, claim, at_seq, now, base]
    params += (run_id, name)
    for n, (kind, value) in enumerate(items, 1):
        params += (n, kind, value)
    params += (run_id, lease.owner, lease.fence, step_key, attempt, claim, base)
    count = yield Sql(_sql.append_stream_items(len(items)), params)
    if not count:
        raise LeaseLost(run_id)
    return int(count)


@operation
@path("many")
def void_attempt(
    lease: Lease, run_id: str, step_key: str, *, attempt: int, claim: int, own: bool, now: float
) -> Program[list[str]]:
    """Reset the chunks of step `step_key`'s attempts; the names of the streams reset.

    `own`: the attempt (`attempt`, `claim`) failed, its chunks are void. Otherwise the
    other attempts' chunks not voided yet are (their workers died), before this one
    writes. Raises LeaseLost if the run is not held.
    """
    rows = yield all_rows(_sql.SELECT_UNVOIDED, (run_id, step_key, -1, -1))
    mine = [(int(row[1]), int(row[2])) == (attempt, claim) for row in rows]
    voided = [row for row, is_mine in zip(rows, mine, strict=True) if is_mine == own]
    for name, dead_attempt, dead_claim in voided:
        params = _reset_params(lease, run_id, name, step_key, dead_attempt, dead_claim, now)
        if not (yield Sql(_sql.append_stream_items(1), params)):
            raise LeaseLost(run_id)
    return sorted({str(row[0]) for row in voided})


def _reset_params(
    lease: Lease, run_id: str, name: str, step_key: str, attempt: int, claim: int, now: float
) -> list[object]:
    """The parameters of a reset of (step_key, attempt, claim)'s chunks (it has no number)."""
    params: list[object] = [run_id, name, step_key, attempt, claim, None, now, None]
    params += (run_id, name, 1, "reset", None, run_id, lease.owner, lease.fence)
    return [*params, step_key, attempt, claim, None]


@operation
def appended(
    run_id: str, name: str, step_key: str, attempt: int, claim: int, n: int
) -> Program[bool]:
    """Read: whether the writer (step_key, attempt, claim) stored its item number `n`.

    What a writer asks when an append's fate is unknown (its connection was lost).
    """
    rows = yield all_rows(_sql.SELECT_APPENDED, (run_id, name, step_key, attempt, claim, n))
    return bool(rows)


@operation
def unfinished_writers(run_id: str) -> Program[list[tuple[str, str, int, int]]]:
    """Read: (name, step_key, attempt, claim) of chunks not voided of steps with no outcome."""
    rows = yield all_rows(_sql.SELECT_UNFINISHED_UNVOIDED, (run_id,))
    return [(str(name), str(key), int(attempt), int(claim)) for name, key, attempt, claim in rows]


@operation
@path("many")
def void_unfinished(lease: Lease, run_id: str, *, now: float) -> Program[list[str]]:
    """Reset the chunks of steps with no outcome (the run ends without them); the names.

    Their attempts' workers died, and the run ends (cancelled, failed) before those steps
    run again. Raises LeaseLost if the run is not held.
    """
    rows = yield all_rows(_sql.SELECT_UNFINISHED_UNVOIDED, (run_id,))
    for name, step_key, dead_attempt, dead_claim in rows:
        params = _reset_params(lease, run_id, name, step_key, dead_attempt, dead_claim, now)
        if not (yield Sql(_sql.append_stream_items(1), params)):
            raise LeaseLost(run_id)
    return sorted({str(row[0]) for row in rows})


@operation
def read_stream(
    run_id: str, name: str, *, after: int = 0, limit: int = 1000
) -> Program[list[StreamItem]]:
    """Read: the items of stream `name` of the run with seq > `after`, in order, at most `limit`."""
    rows = yield all_rows(_sql.SELECT_STREAM_ITEMS, (run_id, name, after, limit))
    return [
        StreamItem(int(seq), str(kind), str(key), int(attempt), value, float(created))
        for seq, kind, key, attempt, value, created in rows
    ]


@operation
def workflow_writes(run_id: str, name: str) -> Program[int]:
    """Read: how many items workflow code wrote to stream `name` (a replay skips them)."""
    rows = yield all_rows(_sql.STREAM_WORKFLOW_TOP, (run_id, name))
    return int(rows[0][0] or 0) if rows else 0


@operation
def stream_names(run_id: str) -> Program[list[tuple[str, int, int]]]:
    """Read: (name, items, highest seq) of each stream of the run, by name."""
    rows = yield all_rows(_sql.SELECT_STREAM_NAMES, (run_id,))
    return [(str(name), int(count), int(top)) for name, count, top in rows]
