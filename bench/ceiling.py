"""`python -m bench.ceiling [ROUNDS]`: 200 ten-step runs at once, beside a raw commit.

For each store (SQLite, and PostgreSQL when reachable) one engine with a slot per run
starts 200 ten-step runs at once and awaits them all, ROUNDS times (default 7); a raw
commit of the same database is measured just before each round. Prints, per store, the
median runs per second, the wall time per step (a round's seconds over its 2,000 steps)
and that time's ratio to the raw commit measured beside it (the median of the rounds'
ratios: commit latency drifts on a shared machine), and the CPU time this process spent
per step (less noisy than wall time on a loaded machine; PostgreSQL's own CPU is not in
it). With group commit a step can cost less than one commit: many steps share each one.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cairn
from bench import raw, stores
from bench.throughput import _batch
from bench.workflows import STEPS

RUNS = 200


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


async def measure(url: str, raw_us: Callable[[], float], rounds: int) -> dict[str, Any]:
    """Rounds of RUNS runs at once, each beside a raw commit measured just before it."""
    seconds: list[float] = []
    cpu: list[float] = []
    raws: list[float] = []
    async with cairn.Engine(url, workers=RUNS) as engine:
        await _batch(engine, 50)  # warm up
        for _ in range(rounds):
            raws.append(await asyncio.to_thread(raw_us))
            started, cpu_started = time.perf_counter(), time.process_time()
            await _batch(engine, RUNS)
            seconds.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
    steps = RUNS * STEPS
    ratios = [s / steps * 1e6 / r for s, r in zip(seconds, raws, strict=True)]
    return {
        "runs_per_second": RUNS / statistics.median(seconds),
        "us_per_step": statistics.median(seconds) / steps * 1e6,
        "cpu_us_per_step": statistics.median(cpu) / steps * 1e6,
        "raw_commit_us": statistics.median(raws),
        "ratio_to_raw_commit": statistics.median(ratios),
        "rounds_runs_per_second": [RUNS / s for s in seconds],
    }


def line(name: str, data: dict[str, Any]) -> str:
    rounds = ", ".join(f"{r:,.0f}" for r in data["rounds_runs_per_second"])
    return (
        f"{name:<10} {data['runs_per_second']:>7,.0f} runs/s  {data['us_per_step']:>6.1f} µs/step"
        f" ({data['cpu_us_per_step']:.1f} CPU)"
        f"  raw commit {data['raw_commit_us']:>6.1f} µs"
        f"  step/raw {data['ratio_to_raw_commit']:.2f}x"
        f"  (rounds: {rounds})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__)
    parser.add_argument("rounds", nargs="?", type=int, default=7, help="rounds per store")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument("--no-sqlite", action="store_true", help="measure PostgreSQL only")
    args = parser.parse_args(argv)

    def on_sqlite(folder: Path) -> None:
        note(f"sqlite: {args.rounds} rounds of {RUNS} ten-step runs at once")

        def sqlite_raw() -> float:
            return raw.sqlite_commit_us(str(folder / "raw.db"), commits=500)

        url = f"sqlite:///{folder / 'cairn.db'}"
        print(line("SQLite", asyncio.run(measure(url, sqlite_raw, args.rounds))), flush=True)

    def on_postgres(url: str) -> None:
        note(f"postgres: {args.rounds} rounds of {RUNS} ten-step runs at once")

        def pg_raw() -> float:
            return raw.postgres_commit_us(url, commits=200)

        print(line("PostgreSQL", asyncio.run(measure(url, pg_raw, args.rounds))))

    return stores.on_each_store(
        "cairn-ceiling-",
        None if args.no_sqlite else on_sqlite,
        None if args.no_postgres else on_postgres,
    )


if __name__ == "__main__":
    sys.exit(main())
