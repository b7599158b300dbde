"""The database's own part of a cairn step on SQLite: its journal row, committed alone.

`bench.raw` times the smallest durable write there is (two text columns, no index). A
cairn step writes more than that: a 12-column journal row keyed by (run, key), inserted
only if the run is still held by its writer (the fence, a read of the run's row), and it
commits on its own when runs do not share commits. This times exactly that statement,
from Python, on a database cairn created, with parameters built beforehand: the floor a
step on SQLite cannot go below whatever the engine's Python does. The difference between
a step and this floor is the engine; the difference between this floor and the raw
commit is the row cairn keeps.

    python -m bench.step_floor
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cairn
from bench import raw
from bench.workflows import ten_steps
from cairn.store._sql.runs import INSERT_STEP_OWNED
from cairn.store.records import STEP_FIELDS, StepRecord
from cairn.store.sqlite.connections import connect

OWNER, FENCE = "bench-floor", 7


async def database_with_a_held_run(path: str) -> str:
    """A database cairn created and migrated, with one run marked held by OWNER."""
    async with cairn.Engine(f"sqlite:///{path}") as engine:
        run = await engine.start(ten_steps, 0)
        await run.result()
    conn = connect(path, busy_ms=5_000)
    conn.execute(
        "UPDATE runs SET owner = ?, fence = ? WHERE run_id = ?", (OWNER, FENCE, run.run_id)
    )
    conn.close()
    return run.run_id


def prepare(conn: sqlite3.Connection) -> None:
    """The pragmas cairn's SQLite store sets on its connection (WAL is the file's)."""
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA temp_store=MEMORY")
    conn.execute("PRAGMA cache_size=-65536")


def _rows(run_id: str, first: int, count: int) -> list[tuple[object, ...]]:
    """INSERT_STEP_OWNED's parameters for `count` completed steps, as the engine builds them."""
    rows = []
    for seq in range(first, first + count):
        now = time.time()
        record = StepRecord(
            run_id, seq, f"bench.add#{seq}", "step", "bench.add", "completed", 1, now, now,
            str(seq + 1), None, f"[{seq}]",
        )  # fmt: skip
        rows.append((*(getattr(record, name) for name in STEP_FIELDS), run_id, OWNER, FENCE))
    return rows


def sqlite_step_row_us(path: str, *, commits: int = 3000, rounds: int = 3) -> float:
    """µs per journal row committed alone (median of `rounds`), on cairn's own pragmas."""
    run_id = asyncio.run(database_with_a_held_run(path))
    conn = connect(path, busy_ms=5_000)
    prepare(conn)
    first = 100  # past the steps the run itself recorded

    def batch(n: int) -> float:
        nonlocal first
        rows = _rows(run_id, first, n)
        first += n
        started = time.perf_counter()
        for row in rows:
            if conn.execute(INSERT_STEP_OWNED, row).rowcount != 1:
                raise RuntimeError("the fence refused a step row: the floor measured nothing")
        return time.perf_counter() - started

    batch(200)  # warm up
    elapsed = statistics.median(batch(commits) for _ in range(rounds))
    conn.close()
    return elapsed / commits * 1e6


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        pairs = []
        for i in range(3):
            floor = sqlite_step_row_us(str(base / f"floor{i}.db"))
            commit = raw.sqlite_commit_us(str(base / f"raw{i}.db"), commits=3000)
            pairs.append((floor, commit))
    floor = statistics.median(f for f, _ in pairs)
    commit = statistics.median(c for _, c in pairs)
    ratio = statistics.median(f / c for f, c in pairs)
    print(f"raw commit (bench.raw):           {commit:6.1f} µs", file=sys.stdout)
    print(f"cairn's step row, committed alone: {floor:6.1f} µs  ({ratio:.2f}x the raw commit)")


if __name__ == "__main__":
    main()
