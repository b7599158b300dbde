"""A prune's second half: delete the blobs no stored value references any more.

Runs are deleted first (store/programs/prune.py, each batch one transaction), blobs
after: a blob is deleted only once no row names it, so a kill -9 at any point leaves no
reference without its blob, at worst blobs nobody references, which the next sweep
deletes. A blob written in the last `GRACE` seconds is kept whatever the database says:
its value may be on its way to a checkpoint not yet committed (a blob is written before
the checkpoint that names it). Content addressing makes one blob serve every value with
the same text, so a blob goes only when no value at all names it; a `put` of a value
already kept marks its blob fresh again, and the sweep checks each blob's age again just
before deleting it (what is left is the instant between that check and the unlink).
"""

from __future__ import annotations

import asyncio
import time

from cairn.blobs.reference import MARK, hashes_in
from cairn.blobs.stores import BlobStore
from cairn.observability import logcontext
from cairn.store import Store
from cairn.store.programs.base import Program, all_rows, operation

log = logcontext.logger("cairn.blobs")

GRACE = 3600.0  # seconds a fresh blob is kept, referenced or not

# Every column that holds a stored value (serializer text) and so may hold a reference.
# Over-reading is harmless (only keeps blobs); a column left out would lose blobs, so
# tests/blobs/test_sweep.py checks this list against every TEXT column of the schema.
VALUE_COLUMNS = (
    ("runs", "args"),
    ("runs", "result"),
    ("steps", "result"),
    ("steps", "input"),
    ("retried_steps", "result"),
    ("retried_steps", "input"),
    ("messages", "payload"),
    ("stream_chunks", "value"),
    ("schedules", "args"),
    ("tasks", "data"),
    ("tasks", "submitted_values"),
    ("step_tasks", "input"),
    ("run_columns", "value"),
)


@operation
def referenced() -> Program[set[str]]:
    """Every blob hash a stored value names (one read of each value column)."""
    found: set[str] = set()
    for table, column in VALUE_COLUMNS:
        rows = yield all_rows(f"SELECT {column} FROM {table} WHERE {column} LIKE ?", [f"%{MARK}%"])
        for (text,) in rows:
            found |= hashes_in(str(text))
    return found


async def sweep(store: Store, blobs: BlobStore, *, grace: float | None = None) -> int:
    """Delete the blobs (and stray temporary files) older than `grace` nobody names."""
    grace = GRACE if grace is None else grace
    # The listing is taken before the references are read: a blob written after the
    # read began is younger than the listing and so not in it.
    cutoff = time.time() - grace
    candidates = await asyncio.to_thread(
        lambda: [sha for sha, written in blobs.listing() if written < cutoff]
    )
    if not candidates:
        return 0
    names = await store.read_aside(referenced())  # a scan of every value: off the loop
    doomed = [sha for sha in candidates if sha not in names]

    def delete_all() -> None:
        for sha in doomed:
            blobs.delete(sha, written_before=cutoff)

    await asyncio.to_thread(delete_all)
    if doomed:
        log.info("cairn: deleted %d blobs no stored value references", len(doomed))
    return len(doomed)
