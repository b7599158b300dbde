"""`python -m bench.pg_probe`: PostgresStore alone, against a raw commit in the same run.

Prints µs per step for ten-step runs one after another, runs/s for 200 ten-step runs at
once, and committed transactions per run (pg_stat_database.xact_commit) for both.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

import cairn
from bench import postgres, raw
from bench.workflows import STEPS, ten_steps

SEQUENTIAL_RUNS = 300
CONCURRENT_RUNS = 200


async def sequential(url: str, runs: int, rounds: int = 3) -> float:
    """Median µs per step over `rounds` of `runs` runs started one after another."""
    times = []
    async with cairn.Engine(url) as engine:
        for i in range(30):
            await (await engine.start(ten_steps, i)).result()
        for _ in range(rounds):
            started = time.perf_counter()
            for i in range(runs):
                await (await engine.start(ten_steps, i)).result()
            times.append(time.perf_counter() - started)
    return statistics.median(times) / (runs * STEPS) * 1e6


async def concurrent(url: str, runs: int, rounds: int = 5) -> list[float]:
    """Runs per second of each round of `runs` runs started at once."""
    rates = []
    async with cairn.Engine(url, workers=runs) as engine:
        await _batch(engine, 50)
        for _ in range(rounds):
            started = time.perf_counter()
            await _batch(engine, runs)
            rates.append(runs / (time.perf_counter() - started))
    return rates


async def commits_per_run(url: str, runs: int, *, at_once: bool) -> float:
    """xact_commit per run: a session with `runs` runs, minus the same session without.

    Backends report their counts when they exit, so each session closes its engine
    before counting; subtracting the empty session leaves start and stop out.
    """

    async def session(count: int) -> int:
        before = await asyncio.to_thread(postgres.committed_transactions, url)
        async with cairn.Engine(url, workers=max(count, 16) if at_once else 16) as engine:
            await _batch(engine, 20)
            if at_once:
                for _ in range(5):
                    await _batch(engine, count // 5)
            else:
                for i in range(count):
                    await (await engine.start(ten_steps, i)).result()
        return await asyncio.to_thread(postgres.committed_transactions, url) - before

    empty = await session(0)
    return (await session(runs) - empty) / runs


async def _batch(engine: cairn.Engine, runs: int) -> None:
    handles = await asyncio.gather(*(engine.start(ten_steps, i) for i in range(runs)))
    results = await asyncio.gather(*(handle.result() for handle in handles))
    assert results == [i + STEPS for i in range(runs)]


def main() -> int:
    reason = postgres.problem()
    if reason is not None:
        print(f"skipped: {reason}", file=sys.stderr)
        return 1
    report: dict[str, Any] = {}
    with postgres.fresh_database() as url:
        report["raw commit (µs)"] = raw.postgres_commit_us(url)
        report["sequential (µs/step)"] = asyncio.run(sequential(url, SEQUENTIAL_RUNS))
        rates = asyncio.run(concurrent(url, CONCURRENT_RUNS))
        report["200 at once (runs/s, median)"] = statistics.median(rates)
        report["200 at once (runs/s, rounds)"] = [round(rate) for rate in rates]
        report["commits per run, 200 at once"] = asyncio.run(
            commits_per_run(url, 5 * CONCURRENT_RUNS, at_once=True)
        )
        report["commits per run, one after another"] = asyncio.run(
            commits_per_run(url, 50, at_once=False)
        )
    report["sequential / raw commit"] = report["sequential (µs/step)"] / report["raw commit (µs)"]
    for name, value in report.items():
        shown = f"{value:,.2f}" if isinstance(value, float) else str(value)
        print(f"{name:40} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
