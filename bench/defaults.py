"""`python -m bench.defaults [ROUNDS]`: 200 ten-step runs at once on a default `Engine(url)`.

What a user gets without tuning, beside the ceiling: on one PostgreSQL database (SQLite
with `--sqlite`), rounds alternate between a default `cairn.Engine(url)` and one with a
slot per run (`workers=200`, what `bench.ceiling` measures), each round beside a raw
commit measured just before it. Prints per engine the median runs/s, wall time per step,
its ratio to the raw commit (median of the rounds' ratios), CPU per step of this
process, and every round, so the spread (the machine's noise) shows.
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
from bench import postgres, raw
from bench.throughput import _batch
from bench.workflows import STEPS

RUNS = 200
ENGINES: dict[str, dict[str, Any]] = {"default Engine(url)": {}, "workers=200": {"workers": RUNS}}


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


async def _round(url: str, options: dict[str, Any]) -> tuple[float, float]:
    async with cairn.Engine(url, **options) as engine:
        await _batch(engine, 50)  # warm up
        started, cpu_started = time.perf_counter(), time.process_time()
        await _batch(engine, RUNS)
        return time.perf_counter() - started, time.process_time() - cpu_started


def measure(url: str, raw_us: Callable[[], float], rounds: int) -> dict[str, dict[str, Any]]:
    """Per engine: rounds of RUNS runs at once, alternating engines, each beside a raw commit."""
    seen: dict[str, dict[str, list[float]]] = {
        name: {"seconds": [], "cpu": [], "raw": []} for name in ENGINES
    }
    for _ in range(rounds):
        for name, options in ENGINES.items():
            seen[name]["raw"].append(raw_us())
            seconds, cpu = asyncio.run(_round(url, options))
            seen[name]["seconds"].append(seconds)
            seen[name]["cpu"].append(cpu)
    steps = RUNS * STEPS
    report: dict[str, dict[str, Any]] = {}
    for name, data in seen.items():
        pairs = zip(data["seconds"], data["raw"], strict=True)
        report[name] = {
            "runs_per_second": RUNS / statistics.median(data["seconds"]),
            "us_per_step": statistics.median(data["seconds"]) / steps * 1e6,
            "cpu_us_per_step": statistics.median(data["cpu"]) / steps * 1e6,
            "raw_commit_us": statistics.median(data["raw"]),
            "ratio_to_raw_commit": statistics.median(s / steps * 1e6 / r for s, r in pairs),
            "rounds_runs_per_second": [RUNS / s for s in data["seconds"]],
        }
    return report


def line(name: str, data: dict[str, Any]) -> str:
    rounds = ", ".join(f"{r:,.0f}" for r in data["rounds_runs_per_second"])
    return (
        f"{name:<20} {data['runs_per_second']:>7,.0f} runs/s  {data['us_per_step']:>6.1f} µs/step"
        f" ({data['cpu_us_per_step']:.1f} CPU)  raw commit {data['raw_commit_us']:>6.1f} µs"
        f"  step/raw {data['ratio_to_raw_commit']:.2f}x  (rounds: {rounds})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.defaults", description=__doc__)
    parser.add_argument("rounds", nargs="?", type=int, default=5, help="rounds per engine")
    parser.add_argument("--sqlite", action="store_true", help="measure SQLite instead")
    args = parser.parse_args(argv)
    if args.sqlite:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="cairn-defaults-") as tmp:
            folder = Path(tmp)
            url = f"sqlite:///{folder / 'cairn.db'}"
            report = measure(
                url, lambda: raw.sqlite_commit_us(str(folder / "raw.db"), commits=500), args.rounds
            )
    else:
        reason = postgres.problem()
        if reason is not None:
            print(f"PostgreSQL skipped: {reason}")
            return 0
        with postgres.fresh_database() as url:
            note(f"postgres: {args.rounds} rounds per engine of {RUNS} ten-step runs at once")
            report = measure(url, lambda: raw.postgres_commit_us(url, commits=200), args.rounds)
    for name, data in report.items():
        print(line(name, data), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
