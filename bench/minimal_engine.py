"""The least a step costs in a Python engine: cairn's rows, written by a bare loop.

A reference for the engine's own overhead, not a product: ten-step workflows whose steps
write exactly cairn's journal row (bench/step_floor.py: the 12 columns, the fence) on a
database cairn created, from a bare asyncio loop with none of the engine's features (no
lease, retries, timeouts, replay, cancellation, observability, streams, queues). Runs at
once share commits, as cairn's do: writes queued in one pass of the loop commit together.
One after another, a step's row commits alone, as cairn's does.

What cairn takes beyond these figures is the price of its features and of its structure;
what these figures take beyond the raw commit no Python engine writing this row avoids.

    python -m bench.minimal_engine
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import raw, step_floor
from cairn.store._sql.runs import INSERT_STEP_OWNED
from cairn.store.sqlite.connections import connect

STEPS = 10


class BareStore:
    """One connection; a write commits alone, or with the writes queued beside it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.loop = asyncio.get_running_loop()
        self.queued: list[tuple[tuple[Any, ...], asyncio.Future[None]]] = []

    async def write(self, row: tuple[Any, ...], alone: bool) -> None:
        if alone:
            if self.conn.execute(INSERT_STEP_OWNED, row).rowcount != 1:
                raise RuntimeError("the fence refused a row")
            return
        future = self.loop.create_future()
        if not self.queued:
            self.loop.call_soon(self.flush)
        self.queued.append((row, future))
        await future

    def flush(self) -> None:
        batch, self.queued = self.queued, []
        self.conn.execute("BEGIN IMMEDIATE")
        for row, _ in batch:
            if self.conn.execute(INSERT_STEP_OWNED, row).rowcount != 1:
                raise RuntimeError("the fence refused a row")
        self.conn.execute("COMMIT")
        for _, future in batch:
            future.set_result(None)


async def add(value: int) -> int:
    return value + 1


async def ten_steps(
    store: BareStore, run_id: str, value: int, alone: bool, fence: tuple[str, str, int]
) -> int:
    """bench.workflows.ten_steps, each step's outcome written before the next starts."""
    for seq in range(1, STEPS + 1):
        started = time.time()
        given = json.dumps([value])
        value = await add(value)
        now = time.time()
        key = f"bench.add#{seq}"
        record = (run_id, seq, key, "step", "bench.add", "completed", 1, started, now)
        row = (*record, json.dumps(value), None, given, *fence)
        await store.write(row, alone)
    return value


async def _measure(
    path: str, held: str, runs: int, rounds: int, raw_us: Any
) -> dict[str, list[float]]:
    fence = (held, step_floor.OWNER, step_floor.FENCE)  # every row passes the held run's fence
    conn = connect(path, busy_ms=5_000)
    step_floor.prepare(conn)
    store = BareStore(conn)
    out: dict[str, list[float]] = {"sequential_us": [], "concurrent_us": [], "raw_us": []}
    for round_ in range(rounds + 1):  # the first round warms up
        commit = await asyncio.to_thread(raw_us)
        started = time.perf_counter()
        for i in range(runs):
            await ten_steps(store, f"s{round_}-{i}", i, True, fence)
        sequential = (time.perf_counter() - started) / (runs * STEPS) * 1e6
        started = time.perf_counter()
        await asyncio.gather(
            *(ten_steps(store, f"c{round_}-{i}", i, False, fence) for i in range(200))
        )
        concurrent = (time.perf_counter() - started) / (200 * STEPS) * 1e6
        if round_:
            out["raw_us"].append(commit)
            out["sequential_us"].append(sequential)
            out["concurrent_us"].append(concurrent)
    conn.close()
    return out


def measure(folder: Path, raw_us: Any, *, runs: int = 300, rounds: int = 3) -> dict[str, Any]:
    """Both figures, each round beside a raw commit measured just before it."""
    path = str(folder / "minimal.db")
    held = asyncio.run(step_floor.database_with_a_held_run(path))
    found = asyncio.run(_measure(path, held, runs, rounds, raw_us))

    def ratio(kind: str) -> float:
        return statistics.median(
            us / commit for us, commit in zip(found[kind], found["raw_us"], strict=True)
        )

    return {
        **found,
        "sequential_ratio": ratio("sequential_us"),
        "concurrent_ratio": ratio("concurrent_us"),
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        found = measure(base, lambda: raw.sqlite_commit_us(str(base / "raw.db"), commits=1000))
    seq, conc = statistics.median(found["sequential_us"]), statistics.median(found["concurrent_us"])
    print(f"raw commit:                        {statistics.median(found['raw_us']):6.1f} µs")
    print(f"one after another, per step:       {seq:6.1f} µs  {found['sequential_ratio']:.2f}x")
    print(f"200 runs at once, per step:        {conc:6.1f} µs  {found['concurrent_ratio']:.2f}x")


if __name__ == "__main__":
    main()
