"""Retention's pace: on SQLite a prune's batches are sized so that none holds the loop long.

SQLite runs a write transaction on the event loop's thread: a batch of 500 runs of a
large history stopped every run of the process for as long as it took (125 ms in a soak
of 100,000 runs of ten 300-byte steps).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from tests.store.kit import T0, run_record, sqlite_connect

from cairn.runtime import retention
from cairn.store import Store, open_store
from cairn.store.programs import runs as run_ops

OLD = T0 - 100 * 86400
STEPS = 40  # a run's history: 40 steps of 1 KB each
RESULT = '"' + "x" * 1000 + '"'


async def _fill(store: Store, url: str, runs: int) -> None:
    """`runs` finished runs of STEPS 1-KB steps each, finished long ago."""
    await asyncio.gather(
        *(
            store.write(
                run_ops.create_run(
                    run_record(
                        f"r{i:05}",
                        status="COMPLETED",
                        created_at=OLD - 10,
                        finished_at=OLD + i,
                    )
                )
            )
            for i in range(runs)
        )
    )
    conn = sqlite_connect(url)
    with conn:
        conn.executemany(
            "INSERT INTO steps (run_id, seq, key, kind, name, status, attempts, result) "
            "VALUES (?, ?, ?, 'step', 's', 'completed', 1, ?)",
            (
                (f"r{i:05}", seq, f"s#{seq}", RESULT)
                for i in range(runs)
                for seq in range(1, STEPS + 1)
            ),
        )
    conn.close()


async def test_prune__on_sqlite_no_batch_holds_the_event_loop_long(sqlite_url: str) -> None:
    store = open_store(sqlite_url)
    await store.open()
    try:
        await _fill(store, sqlite_url, 1000)
        lags: list[float] = []
        done = False

        async def probe() -> None:  # how late a 1 ms sleep wakes: the loop's stalls
            while not done:
                began = time.perf_counter()
                await asyncio.sleep(0.001)
                lags.append(time.perf_counter() - began - 0.001)

        probing = asyncio.create_task(probe())
        await asyncio.sleep(0.01)
        deleted = await retention.prune(store, finished_before=T0, share=retention.SHARE)
        done = True
        await probing
    finally:
        await store.close()

    assert deleted == 1000
    # A batch of 500 such runs held the loop 350 to 450 ms on a busy 2-core machine;
    # batches of about 10 ms are the aim, and such a machine stretches a few of them to
    # 40-60 ms (as it stretches the probe's own sleeps).
    assert max(lags) < 0.15, sorted(lags)[-5:]


class Recording:
    """A store that notes the run limit of each prune batch it is asked to write."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.limits: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def write(self, op: Any) -> Any:
        self.limits.append(op.args[2])  # prune_batch(query, after, limit, dry_run)
        return await self.store.write(op)


async def test_prune__only_a_store_that_writes_on_the_loop_paces_its_batches(
    store_url: str,
) -> None:
    store = open_store(store_url)
    await store.open()
    try:
        await asyncio.gather(
            *(
                store.write(
                    run_ops.create_run(
                        run_record(f"r{i:03}", status="COMPLETED", finished_at=OLD + i)
                    )
                )
                for i in range(200)
            )
        )
        recording = Recording(store)
        deleted = await retention.prune(
            recording,  # type: ignore[arg-type]
            finished_before=T0,
            batch=80,
            pause=0,
        )
    finally:
        await store.close()

    assert deleted == 200
    if store.writes_on_loop:  # SQLite: a first batch of 10, then by pace
        assert recording.limits[0] == retention.FIRST_BATCH
        assert all(b <= min(80, 2 * a) for a, b in itertools.pairwise(recording.limits))
    else:  # PostgreSQL: its statements never hold the loop
        assert recording.limits == [80, 80, 80]
