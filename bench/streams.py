"""`python -m bench.streams`: durable streams, on SQLite and PostgreSQL, beside raw commits.

Two figures per store: chunks per second of one run whose step writes 10,000 chunks (the
writer's time, from its first write to its close returning: every chunk stored), and the
latency of a chunk to a reader in another process (p50, p99 over TICKS chunks written
TICK_GAP apart by a worker process; both processes read the same wall clock). A raw
commit of the same database is measured in the same run.

    python -m bench.streams [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cairn
from bench import postgres, raw

CHUNKS = 10_000
TICKS = 400
TICK_GAP = 0.01  # seconds between the latency run's chunks


@cairn.step("bench.stream_many")
async def stream_many(n: int) -> float:
    """Write n chunks and close; the seconds it took (every chunk stored)."""
    stream = cairn.stream("tokens")
    started = time.perf_counter()
    for i in range(n):
        await stream.write({"i": i, "text": "token"})
    await stream.close()
    return time.perf_counter() - started


@cairn.workflow("bench.streams_many")
async def streams_many(n: int) -> float:
    return float(await stream_many(n))


@cairn.step("bench.stream_ticks")
async def stream_ticks(n: int, gap: float) -> int:
    """Write n chunks `gap` apart, each carrying the wall-clock time it was written."""
    stream = cairn.stream("ticks")
    for i in range(n):
        await stream.write({"i": i, "at": time.time()})
        await asyncio.sleep(gap)
    await stream.close()
    return n


@cairn.workflow("bench.streams_ticks")
async def streams_ticks(n: int, gap: float) -> int:
    return int(await stream_ticks(n, gap))


async def throughput(url: str) -> float:
    """Chunks per second one run's step writes (median of 3 runs)."""
    rates = []
    async with cairn.Engine(url, workers=4) as engine:
        for _ in range(3):
            run = await engine.start(streams_many, CHUNKS)
            rates.append(CHUNKS / float(await run.result()))
    return statistics.median(rates)


async def latency(url: str) -> dict[str, float]:
    """Seconds from a chunk's write (in a worker process) to its reader here: p50, p99."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), *sys.path]))
    worker = subprocess.Popen(
        [sys.executable, "-m", "bench.streams", "--worker", url],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        worker.stdout.readline()  # "ready"
        delays: list[float] = []
        async with cairn.Engine(url, workers=0) as engine:
            run = await engine.start(streams_ticks, TICKS, TICK_GAP)
            async for value in engine.read_stream(run.run_id, "ticks"):
                delays.append(time.time() - value["at"])
        delays = delays[20:]  # the first ones wait for the worker to claim the run
        cuts = statistics.quantiles(delays, n=100)
        return {"p50_ms": cuts[49] * 1e3, "p99_ms": cuts[98] * 1e3, "chunks": len(delays)}
    finally:
        worker.kill()
        worker.communicate()


async def serve(url: str) -> None:
    async with cairn.Engine(url, workers=4, poll_interval=0.05):
        print("ready", flush=True)
        await asyncio.Event().wait()


def measure(url: str, commit_us: float) -> dict[str, Any]:
    rate = asyncio.run(throughput(url))
    late = asyncio.run(latency(url))
    return {
        "chunks_per_s": round(rate),
        "raw_commit_us": round(commit_us, 1),
        "raw_commits_per_s": round(1e6 / commit_us),
        **{k: round(v, 2) for k, v in late.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker")
    options = parser.parse_args()
    if options.worker:
        asyncio.run(serve(options.worker))
        return 0
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as where:
        db = f"{where}/streams.db"
        commit = raw.sqlite_commit_us(f"{where}/raw.db")
        results["sqlite"] = measure(f"sqlite:///{db}", commit)
    if postgres.problem() is None:
        with postgres.fresh_database() as url:
            commit = raw.postgres_commit_us(url)
            results["postgres"] = measure(url, commit)
    if options.json:
        print(json.dumps(results, indent=2))
        return 0
    for store, found in results.items():
        print(
            f"{store:9} {found['chunks_per_s']:>8,} chunks/s "
            f"(raw commit {found['raw_commit_us']} µs, {found['raw_commits_per_s']:,}/s)  "
            "reader in another process: "
            f"p50 {found['p50_ms']} ms, p99 {found['p99_ms']} ms over {found['chunks']} chunks"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
