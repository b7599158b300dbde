"""`python -m bench.claims [RUNS]`: a backlog taken by claims, beside a raw commit.

For each store (SQLite, and PostgreSQL when reachable), in a fresh database: an engine
without workers starts RUNS ten-step runs (default 3,000), which wait PENDING. Then:

- claim of 100: `Store.claim_runs` taking 100 of them at once, median of 10 claims (the
  runs stay claimed, as a worker's would), in ms and per run;
- drain: an engine with 50 slots executes the rest of the backlog, runs per second from
  its opening until the last one is COMPLETED (claims, ten steps and finish of each).

The raw commit of the same database is measured just before, as the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import cairn
from bench import raw, stores
from bench.workflows import ten_steps
from cairn.store.programs import claims as claim_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs import workers as worker_ops
from cairn.store.records import RunQuery, WorkerRecord

CLAIM = 100
CLAIMS = 10
SLOTS = 50


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


async def measure(url: str, runs: int) -> dict[str, float]:
    async with cairn.Engine(url, workers=0) as engine:
        for first in range(0, runs, 500):
            await asyncio.gather(*(engine.start(ten_steps, i) for i in range(first, first + 500)))
        now = time.time()
        worker = WorkerRecord("bench-claimer", "bench", os.getpid(), now, now, concurrency=CLAIM)
        await engine.store.write(worker_ops.register_worker(worker))
        took = []
        for _ in range(CLAIMS):
            started = time.perf_counter()
            claimed = await engine.store.write(
                claim_ops.claim(worker.worker_id, CLAIM, now=time.time(), stale=False)
            )
            took.append(time.perf_counter() - started)
            if len(claimed.runs) != CLAIM:
                raise RuntimeError(f"a claim took {len(claimed.runs)} runs, not {CLAIM}")
        left = runs - CLAIM * CLAIMS
    started = time.perf_counter()
    async with cairn.Engine(url, workers=SLOTS) as engine:
        while await _completed(engine) < left:
            await asyncio.sleep(0.02)
        drained = time.perf_counter() - started
    claim_ms = statistics.median(took) * 1000
    return {
        "claim_ms": claim_ms,
        "claim_us_per_run": claim_ms * 1000 / CLAIM,
        "drain": left / drained,
    }


async def _completed(engine: cairn.Engine) -> int:
    counts = await engine.store.read(run_ops.count_runs(RunQuery()))
    return int(counts.get("COMPLETED", 0))


def line(name: str, raw_us: float, data: dict[str, float]) -> str:
    return (
        f"{name:<10} raw commit {raw_us:>6.1f} µs  claim of {CLAIM}: {data['claim_ms']:>6.2f} ms"
        f" ({data['claim_us_per_run']:.0f} µs a run)  drain with {SLOTS} slots:"
        f" {data['drain']:>6,.0f} runs/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.claims", description=__doc__)
    parser.add_argument("runs", nargs="?", type=int, default=3000, help="runs of the backlog")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    args = parser.parse_args(argv)
    if args.runs < CLAIM * CLAIMS + SLOTS:
        parser.error(f"runs must be at least {CLAIM * CLAIMS + SLOTS}")

    def on_sqlite(folder: Path) -> None:
        note(f"sqlite: a backlog of {args.runs:,} runs")
        raw_us = raw.sqlite_commit_us(str(folder / "raw.db"), commits=500)
        data = asyncio.run(measure(f"sqlite:///{folder / 'cairn.db'}", args.runs))
        print(line("SQLite", raw_us, data), flush=True)

    def on_postgres(url: str) -> None:
        note(f"postgres: a backlog of {args.runs:,} runs")
        raw_us = raw.postgres_commit_us(url, commits=200)
        print(line("PostgreSQL", raw_us, asyncio.run(measure(url, args.runs))))

    return stores.on_each_store(
        "cairn-claims-", on_sqlite, None if args.no_postgres else on_postgres
    )


if __name__ == "__main__":
    sys.exit(main())
