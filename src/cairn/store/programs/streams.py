"""Programs of durable streams: appending a run's stream items, voiding attempts, reading.

What the items mean to writers and readers is core/streams.py's and runtime/streams.py's;
here they are rows, numbered per stream (run, name) by `seq`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cairn.store import _sql
from cairn.store.programs.base import Program, Sql, all_rows, one_row, operation, path
from cairn.store.protocol import LeaseLost
from cairn.store.records import Lease, StreamItem

WORKFLOW_KEY = "~stream"
"""The step_key of items written by workflow code (not by a step)."""


def notice(run_id: str, name: str) -> str:
    """The NOTIFY payload telling readers of stream `name` of `run_id` (see `noticed`)."""
    return json.dumps([run_id, name])


def noticed(payload: str) -> tuple[str, str] | None:
    """(run_id, name) of a `notice` payload; None if it is not one."""
    try:
        run_id, name = json.loads(payload)
    except (ValueError, TypeError):
        return None
    return str(run_id), str(name)


def _top(run_id: str, name: str) -> Program[int]:
    rows = yield all_rows(_sql.STREAM_TOP, (run_id, name))
    return int(rows[0][0] or 0) if rows else 0


def _void(
    run_id: str, step_key: str, writers: Sequence[Sequence[object]], now: float
) -> Program[None]:
    """Append a reset for each (name, attempt, claim) of `writers`."""
    for name, attempt, claim in writers:
        seq = (yield from _top(run_id, str(name))) + 1
        params = (run_id, name, seq, "reset", step_key, attempt, claim, None, None, now)
        yield Sql(_sql.INSERT_STREAM_ITEM, params)


@operation
@path("many")
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
    first: bool = False,
    now: float,
) -> Program[int]:
    """Append (kind, value) items to stream `name` of the run held by `lease`; the last seq.

    With `first` (a writer's first append), the chunks other attempts of step `step_key`
    left unvoided are voided first: their worker died. Raises LeaseLost if not held.
    """
    held = yield one_row(_sql.STREAM_HELD, (run_id, lease.owner, lease.fence))
    if held is None:
        raise LeaseLost(run_id)
    if first and step_key != WORKFLOW_KEY:
        rows = yield all_rows(_sql.SELECT_UNVOIDED, (run_id, step_key, attempt, claim))
        yield from _void(run_id, step_key, rows, now)
    seq = yield from _top(run_id, name)
    params: list[object] = []
    for kind, value in items:
        seq += 1
        params += (run_id, name, seq, kind, step_key, attempt, claim, at_seq, value, now)
    yield Sql(_sql.insert_stream_items(len(items)), params)
    yield Sql(_sql.STREAM_NOTIFY, (notice(run_id, name),))
    return seq


@operation
@path("many")
def void_attempt(
    run_id: str, step_key: str, *, attempt: int, claim: int, own: bool, now: float
) -> Program[int]:
    """Reset the chunks of step `step_key`'s attempt; how many streams it reset.

    `own`: the attempt (`attempt`, `claim`) failed, its chunks are void. Otherwise the
    other attempts' chunks not voided yet are (their workers died), before this one runs.
    """
    rows = yield all_rows(_sql.SELECT_UNVOIDED, (run_id, step_key, -1, -1))
    if own:
        rows = [row for row in rows if (int(row[1]), int(row[2])) == (attempt, claim)]
    else:
        rows = [row for row in rows if (int(row[1]), int(row[2])) != (attempt, claim)]
    yield from _void(run_id, step_key, rows, now)
    for name in {str(row[0]) for row in rows}:
        yield Sql(_sql.STREAM_NOTIFY, (notice(run_id, name),))
    return len(rows)


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
