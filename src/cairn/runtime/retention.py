"""Retention: delete finished runs past an age, by hand (`cairn runs prune`) or on a tick.

The work is done by the operation `prune_runs` (store/programs/prune.py) one short
transaction at a time (500 runs at most; on SQLite as many as take about 10 ms, since its
transactions run on the event loop's thread); between batches the event loop is let go,
so workers sharing the engine (and, on SQLite, the database's one writer) go on meanwhile.
Several engines pruning at once is safe: each run is deleted once. What is kept whatever
its age: see store/programs/prune.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from cairn import cancelling
from cairn.blobs import BlobStore, sweep
from cairn.clock import Clock
from cairn.errors import StoreError
from cairn.observability import logcontext
from cairn.store import Store
from cairn.store.programs import prune as prune_ops
from cairn.store.records import PruneQuery

log = logcontext.logger("cairn.retention")

BATCH = 500  # runs per transaction at most: a short lock on either store
# On a store whose transactions run on the event loop's thread (SQLite), a batch holds up
# every run of the process while it runs: its size follows the last batch's pace so that
# one takes about this long (seconds), about as long as a busy worker's group commit.
BATCH_SECONDS = 0.01
FIRST_BATCH = 10  # runs of the first batch on such a store, before its pace is known
PAUSE = 0.01  # seconds between batches, so other writers get the database
INTERVAL = 60.0  # seconds between two prunes of a running engine
# The share of its time an engine's own prune keeps the database busy: workers first.
SHARE = 0.5
SWEEP_EVERY = 3600.0  # seconds between two blob sweeps of a prune that deleted nothing


async def prune(
    store: Store,
    *,
    finished_before: float,
    statuses: Sequence[str] | None = None,
    workflow: str | None = None,
    dry_run: bool = False,
    batch: int = BATCH,
    pause: float = PAUSE,
    share: float = 1.0,
    blobs: BlobStore | None = None,
) -> int:
    """Delete (or count, with `dry_run`) every prunable finished run; how many.

    Each transaction looks at `batch` runs at most; on a store whose transactions run
    on the event loop's thread (`store.writes_on_loop`: SQLite), fewer, so that one
    takes about BATCH_SECONDS (see next_batch). Between two batches it waits `pause`
    seconds, or longer so that pruning takes at most `share` of the time (0.5: it waits
    as long as the batch took), leaving the database to the workers the rest of it.
    Then, with `blobs`, the blobs no stored value references any more are deleted
    (blobs/sweep.py), after the runs: a crash in between leaves orphan blobs for the
    next prune, never a reference without its blob.
    """
    query = PruneQuery(finished_before, tuple(statuses) if statuses else None, workflow)
    paced = store.writes_on_loop
    size = min(batch, FIRST_BATCH) if paced else batch
    total, after = 0, None
    while True:
        began = time.monotonic()
        prune_op = prune_ops.prune_runs(query, after=after, limit=size, dry_run=dry_run)
        done = await (store.read(prune_op) if dry_run else store.write(prune_op))
        total += done.count
        if done.after is None:
            if blobs is not None and not dry_run:
                await sweep.sweep(store, blobs)
            return total
        after = done.after
        took = time.monotonic() - began
        if paced:
            size = next_batch(size, took, batch)
        await asyncio.sleep(max(pause, took * (1 - share) / share))


def next_batch(size: int, took: float, most: int) -> int:
    """The size of the batch after one of `size` runs that took `took` seconds.

    As many runs as take BATCH_SECONDS at the last batch's pace, between 1 and `most`:
    fewer at once after a slow batch (larger runs, a busy machine), at most twice as
    many after a quick one, so that one batch of unusually small runs cannot make the
    next, of large ones, long. (A single run with a very long history still takes as
    long as it takes: a run is deleted whole, in one transaction.)
    """
    paced = round(size * BATCH_SECONDS / took) if took > 0 else most
    return max(1, min(most, 2 * size, paced))


class Retention:
    """An engine's periodic prune: every `interval`, runs finished `keep` seconds ago go."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        keep: float,
        interval: float = INTERVAL,
        blobs: BlobStore | None = None,
    ) -> None:
        self.store = store
        self.blobs = blobs
        self._swept_at = float("-inf")  # when its blobs were last swept (monotonic)
        self.clock = clock
        self.keep = keep
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Prune now, then every `interval`, until `stop`."""
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="cairn-retention")

    async def stop(self) -> None:
        """Stop pruning (a batch under way is rolled back: it is one transaction)."""
        task, self._task = self._task, None
        if task is not None:
            await cancelling.stop([task])  # a batch waiting on a silent database too

    async def prune_now(self) -> int:
        """One prune of everything past retention; how many runs it deleted."""
        deleted = await prune(self.store, finished_before=self.clock.now() - self.keep, share=SHARE)
        if deleted:
            log.info("cairn: retention deleted %d finished runs", deleted)
        # The sweep reads every stored value's column: after runs went, or once per
        # SWEEP_EVERY (for orphans a crash left), not on every tick.
        due = time.monotonic() - self._swept_at >= SWEEP_EVERY
        if self.blobs is not None and (deleted or due):
            await sweep.sweep(self.store, self.blobs)
            self._swept_at = time.monotonic()
        return deleted

    async def _loop(self) -> None:
        while True:
            try:
                await self.prune_now()
            except StoreError as exc:  # the database is away: try at the next tick
                log.warning("cairn: retention could not prune (%s); trying again later", exc)
            except Exception:  # never let pruning take the engine down with it
                log.exception("cairn: retention failed; trying again later")
            await asyncio.sleep(self.interval)
