"""Footprint of sleeping runs: `python -m bench.sleepers [N]` (default 1,000).

Starts N runs that each do one step and then sleep an hour, and reports how long until
all are durably asleep (SLEEPING in the database), the process's RSS and thread count,
and how late a due timer fires.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

import cairn


@cairn.step(name="bench.touch")
async def touch(i: int) -> int:
    return i


@cairn.workflow(name="bench.nap")
async def nap(i: int) -> int:
    await touch(i)
    await cairn.sleep("1h")
    return i


@cairn.step(name="bench.now")
async def now() -> float:
    return time.time()


@cairn.workflow(name="bench.late")
async def late() -> float:
    started = await now()
    await cairn.sleep("2s")
    return time.time() - started - 2.0


def peak_rss_mb() -> float:
    """The most RSS the process has had so far (ru_maxrss: KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return 0.0


async def main(count: int, folder: Path) -> None:
    async with cairn.Engine(f"sqlite:///{folder / 'sleepers.db'}", workers=100) as engine:
        base = rss_mb()
        started = time.perf_counter()
        for first in range(0, count, 500):
            batch = range(first, min(count, first + 500))
            await asyncio.gather(*(engine.start(nap, i) for i in batch))
        # Asleep once none is left pending or running (cheap: at most one row each).
        while any([await engine.list_runs(status=s, limit=1) for s in ("PENDING", "RUNNING")]):
            await asyncio.sleep(0.05)
        asleep = time.perf_counter() - started
        # Before listing them below (that list holds every sleeper's summary at once).
        rss, peak, threads = rss_mb(), peak_rss_mb(), threading.active_count()
        assert len(await engine.list_runs(status="SLEEPING", limit=count)) == count
        print(
            f"{count:,} sleepers durably asleep in {asleep:.2f} s; RSS {rss:.0f} MB, "
            f"peak {peak:.0f} MB (empty engine {base:.0f} MB); threads {threads}"
        )
        runs = [await engine.start(late) for _ in range(5)]
        lateness = [await run.result(timeout=30) for run in runs]
        print(f"due timers fired late by: {', '.join(f'{x * 1000:.0f} ms' for x in lateness)}")


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory(prefix="cairn-sleepers-") as tmp:
        asyncio.run(main(n, Path(tmp)))
