"""The pre-deploy check's speed: `python -m bench.check [N]` (default 10,000 runs).

Parks N runs of a ten-step workflow (each waits for an event after its steps) in a fresh
SQLite database, then times a plain read of the same histories (listing the unfinished
runs and loading each journal) and `engine.check()`, which reads them and replays each
against the code. The replay itself is the difference.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import cairn
from cairn.runtime import deploy_check
from cairn.store.programs import journal as journal_ops

STEPS = 10


@cairn.step(name="bench.check_add")
async def add(value: int) -> int:
    return value + 1


@cairn.workflow(name="bench.check_parked")
async def parked(value: int) -> int:
    for _ in range(STEPS):
        value = await add(value)
    await cairn.wait_for_event("go")
    return value


async def park(url: str, n: int) -> None:
    async with cairn.Engine(url, workers=200) as engine:
        for start in range(0, n, 1000):
            await asyncio.gather(
                *(engine.start(parked, i) for i in range(start, min(n, start + 1000)))
            )
        while await _waiting(engine) < n:
            await asyncio.sleep(0.2)


async def _waiting(engine: cairn.Engine) -> int:
    found, cursor = 0, None
    while True:
        page = await engine.list_runs(status="waiting", limit=1000, cursor=cursor)
        found += len(page.runs)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


async def measure(url: str) -> dict[str, float]:
    async with cairn.Engine(url, workers=0) as engine:
        began = time.perf_counter()
        runs = await deploy_check._unfinished(engine.store, None, None)
        for run in runs:
            await engine.store.read(journal_ops.load_journal(run.run_id))
        read = time.perf_counter() - began
        began = time.perf_counter()
        report = await engine.check()
        checked = time.perf_counter() - began
    assert report.ok and report.runs == len(runs), report.divergences[:3]
    return {"runs": len(runs), "read_s": read, "check_s": checked}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'check.db'}"
        began = time.perf_counter()
        asyncio.run(park(url, n))
        print(
            f"... parked {n} ten-step runs in {time.perf_counter() - began:.1f} s", file=sys.stderr
        )
        found = asyncio.run(measure(url))
    runs, read, checked = found["runs"], found["read_s"], found["check_s"]
    print(f"cairn check --db, {runs} unfinished ten-step runs on SQLite (one process):")
    print(f"  plain read of the histories   {read:6.2f} s  ({read / runs * 1e6:6.0f} µs/run)")
    print(f"  check (read + replay)         {checked:6.2f} s  ({checked / runs * 1e6:6.0f} µs/run)")
    print(f"  ratio check / plain read      {checked / read:6.2f}x")


if __name__ == "__main__":
    main()
