"""`python -m bench`: cairn on SQLite (and PostgreSQL when reachable) beside raw commits.

Prints a table, or the same numbers as JSON with `--json`. Every ratio is against a raw
commit measured in the same run on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cairn
from bench import crash, minimal_engine, postgres, raw, step_floor, throughput
from bench.workflows import ten_steps

SEQUENTIAL_RUNS = 300
SEQUENTIAL_ROUNDS = 5
CONCURRENT_RUNS = 200
STREAM_CALLERS = 4


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


async def transactions_per_run(url: str, runs: int, *, at_once: bool) -> dict[str, float]:
    """PostgreSQL commits per ten-step run: what `runs` more runs add to an engine session.

    `at_once` starts all `runs` together (their writes share commits); otherwise each
    run is started after the previous one finished, the worst case. Two sessions are
    counted, each an engine opened, warmed up with 20 runs and closed (counts are read
    after the close: a connected backend reports its counts late), the second with
    `runs` more runs; the difference leaves out what an engine does once (open, close,
    preparing statements on its connections). `per_run` still includes what the engine
    reads in the background meanwhile (claim and schedule polls, heartbeats);
    `per_run_by_runs` takes that out, at the rate an idle engine shows.
    """

    async def batch(engine: cairn.Engine, count: int) -> None:
        if at_once:
            handles = await asyncio.gather(*(engine.start(ten_steps, i) for i in range(count)))
            await asyncio.gather(*(run.result() for run in handles))
        else:
            for i in range(count):
                await (await engine.start(ten_steps, i)).result()

    async def session(count: int) -> tuple[int, float]:
        before = postgres.committed_transactions(url)
        async with cairn.Engine(url, workers=max(count, 20)) as engine:
            await batch(engine, 20)
            started = time.perf_counter()
            await batch(engine, count)
            took = time.perf_counter() - started
        return postgres.committed_transactions(url) - before, took

    base, _ = await session(0)
    total, took = await session(runs)
    rate = await background_reads_per_second(url)
    per_run = (total - base) / runs
    return {
        "runs": runs,
        "committed": total,
        "committed_without_the_runs": base,
        "seconds": took,
        "background_per_second": rate,
        "per_run": per_run,
        "per_run_by_runs": per_run - rate * took / runs,
    }


async def background_reads_per_second(url: str, seconds: float = 4.0) -> float:
    """Transactions per second of an engine that has nothing to do."""
    async with cairn.Engine(url):
        await asyncio.sleep(1.0)  # past start-up
        before = postgres.committed_transactions(url)
        await asyncio.sleep(seconds)
        return (postgres.committed_transactions(url) - before) / seconds


def measure_store(
    name: str, url: str, raw_commit_us: Callable[[], float], folder: Path
) -> dict[str, Any]:
    note(f"{name}: {SEQUENTIAL_RUNS} ten-step runs one after another, beside raw commits")
    seq = asyncio.run(
        throughput.sequential(url, raw_commit_us, runs=SEQUENTIAL_RUNS, rounds=SEQUENTIAL_ROUNDS)
    )
    note(f"{name}: {CONCURRENT_RUNS} ten-step runs at once")
    conc = asyncio.run(throughput.concurrent(url, raw_commit_us, runs=CONCURRENT_RUNS))
    note(f"{name}: {STREAM_CALLERS} callers, each starting runs one after another")
    streams = asyncio.run(throughput.streams(url, callers=STREAM_CALLERS))
    note(f"{name}: crash recovery (kill -9, then a fresh process)")
    rec = crash.measure(url, folder)
    result: dict[str, Any] = {
        "raw_commit_us": seq.raw_us,
        "sequential": {
            "runs": seq.runs,
            "steps_per_run": 10,
            "seconds": seq.seconds,
            "rounds_seconds": seq.rounds,
            "us_per_step": seq.us_per_step,
            "us_per_run": seq.us_per_run,
            "raw_commit_rounds_us": seq.raw_rounds,
            "ratio_to_raw_commit": seq.ratio,
        },
        "concurrent": {
            "runs": conc.runs,
            "engine_workers": conc.workers,
            "seconds": conc.seconds,
            "rounds_seconds": conc.rounds,
            "runs_per_second": conc.runs_per_second,
            "us_per_step": conc.us_per_step,
            "raw_commit_rounds_us": conc.raw_rounds,
            "ratio_to_raw_commit": conc.ratio,
        },
        "streams": {"callers": STREAM_CALLERS, "runs_per_second": streams},
        "recovery": {
            "trials": len(rec.from_process_start),
            "from_process_start_s": rec.process_median,
            "from_engine_open_s": rec.engine_median,
            "all_from_process_start_s": rec.from_process_start,
            "all_from_engine_open_s": rec.from_engine_open,
        },
    }
    return result


def run_sqlite(folder: Path) -> dict[str, Any]:
    def raw_us() -> float:
        return raw.sqlite_commit_us(str(folder / "raw.db"), commits=1000)

    result = measure_store("sqlite", f"sqlite:///{folder / 'cairn.db'}", raw_us, folder)
    note("sqlite: cairn's step row committed alone, beside raw commits")
    result["step_row"] = step_row_floor(folder, raw_us)
    note("sqlite: a bare asyncio loop writing the same rows, beside raw commits")
    result["minimal_engine"] = minimal_engine.measure(folder, raw_us)
    return result


def step_row_floor(folder: Path, raw_us: Callable[[], float], pairs: int = 3) -> dict[str, Any]:
    """The database's part of a step (bench/step_floor.py), each beside a raw commit."""
    floors, raws = [], []
    for i in range(pairs):
        raws.append(raw_us())
        floors.append(step_floor.sqlite_step_row_us(str(folder / f"floor{i}.db"), commits=1000))
    return {
        "us": statistics.median(floors),
        "rounds_us": floors,
        "raw_commit_rounds_us": raws,
        "ratio_to_raw_commit": statistics.median(f / r for f, r in zip(floors, raws, strict=True)),
    }


def run_postgres(folder: Path) -> dict[str, Any]:
    reason = postgres.problem()
    if reason is not None:
        return {"skipped": reason}
    with postgres.fresh_database() as url:

        def raw_us() -> float:
            return raw.postgres_commit_us(url, commits=300)

        result = measure_store("postgres", url, raw_us, folder)
        note("postgres: transactions per run (pg_stat_database)")
        result["transactions"] = asyncio.run(
            transactions_per_run(url, CONCURRENT_RUNS, at_once=True)
        )
        result["transactions_one_after_another"] = asyncio.run(
            transactions_per_run(url, SEQUENTIAL_RUNS, at_once=False)
        )
    return result


def _us(value: float) -> str:
    return f"{value:,.0f} µs" if value >= 100 else f"{value:,.1f} µs"


def table(report: dict[str, Any]) -> str:
    stores = [("SQLite", report["sqlite"]), ("PostgreSQL", report["postgres"])]
    rows: list[tuple[str, list[str], str]] = []

    def row(label: str, fmt: Any, target: str = "") -> None:
        cells = []
        for _, data in stores:
            try:
                cells.append("-" if "skipped" in data else fmt(data))
            except KeyError:
                cells.append("-")
        rows.append((label, cells, target))

    row("raw commit: INSERT + COMMIT (median of rounds)", lambda d: _us(d["raw_commit_us"]))
    row(
        f"{SEQUENTIAL_RUNS} ten-step runs one after another: per step",
        lambda d: _us(d["sequential"]["us_per_step"]),
        "<= 80 µs / <= 400 µs",
    )
    row(
        "  ratio to the raw commit beside each round",
        lambda d: f"{d['sequential']['ratio_to_raw_commit']:.2f}x",
        "<= 1.5x (SQLite, issue 36)",
    )
    row("  per run (start, 10 steps, finish)", lambda d: _us(d["sequential"]["us_per_run"]))
    row(
        "  the step's own row committed alone (bench.step_floor)",
        lambda d: _us(d["step_row"]["us"]),
    )
    row(
        "    its ratio to the raw commit: the floor of the ratio above",
        lambda d: f"{d['step_row']['ratio_to_raw_commit']:.2f}x",
    )
    row(
        "  a bare loop writing the same rows (bench.minimal_engine)",
        lambda d: f"{d['minimal_engine']['sequential_ratio']:.2f}x",
    )
    row(
        f"{CONCURRENT_RUNS} ten-step runs at once",
        lambda d: f"{d['concurrent']['runs_per_second']:,.0f} runs/s",
        ">= 3,000 / >= 1,000",
    )
    row(
        "  per step (a round's wall time over its 2,000 steps)",
        lambda d: _us(d["concurrent"]["us_per_step"]),
    )
    row(
        "  ratio to the raw commit beside each round",
        lambda d: f"{d['concurrent']['ratio_to_raw_commit']:.2f}x",
        "<= 1.0x (SQLite, issue 36)",
    )
    row(
        "  a bare loop writing the same rows (bench.minimal_engine)",
        lambda d: f"{d['minimal_engine']['concurrent_ratio']:.2f}x",
    )
    row(
        "  PostgreSQL commits per run (pg_stat_database)",
        lambda d: f"{d['transactions']['per_run']:.1f}",
        "<= 12 (PostgreSQL)",
    )
    row(
        f"{STREAM_CALLERS} callers, each starting ten-step runs one after another",
        lambda d: f"{d['streams']['runs_per_second']:,.0f} runs/s",
    )
    row(
        "PostgreSQL commits per run, one after another",
        lambda d: f"{d['transactions_one_after_another']['per_run']:.2f}",
        "<= 12 (PostgreSQL)",
    )
    row(
        "  without the engine's background reads",
        lambda d: f"{d['transactions_one_after_another']['per_run_by_runs']:.2f}",
    )
    row(
        "  background reads of an idle engine, per second",
        lambda d: f"{d['transactions_one_after_another']['background_per_second']:.1f}",
    )
    row(
        "crash recovery: process start -> run done",
        lambda d: f"{d['recovery']['from_process_start_s']:.3f} s",
        "<= 0.4 s",
    )
    row("  Engine open -> run done", lambda d: f"{d['recovery']['from_engine_open_s']:.3f} s")

    width = max(len(label) for label, _, _ in rows)
    header = f"{'':<{width}}  {'SQLite':>14}  {'PostgreSQL':>14}  target"
    lines = [header, "-" * len(header)]
    for label, cells, target in rows:
        lines.append(f"{label:<{width}}  {cells[0]:>14}  {cells[1]:>14}  {target}")
    if "skipped" in report["postgres"]:
        lines.append(f"\nPostgreSQL skipped: {report['postgres']['skipped']}")
    machine = report["machine"]
    lines.append(
        f"\nPython {machine['python']}, SQLite {machine['sqlite']}, {machine['cpus']} CPUs;"
        f" each figure is the median of {SEQUENTIAL_ROUNDS} rounds (one after another, each"
        " beside a raw commit measured just before it), 5 rounds (at once, likewise)"
        f" or {report['sqlite']['recovery']['trials']} kills (recovery);"
        f" total {report['seconds']:.1f} s"
    )
    return "\n".join(lines)


# --- issue 36: a default Engine on PostgreSQL, and the Celery transport (fix-transport) ---
DEFAULTS_ROUNDS = 3
TRANSPORT_RUNS = 300
TRANSPORT_ROUNDS = 2


def run_defaults_and_transports(folder: Path, *, postgres_too: bool) -> dict[str, Any]:
    """A default `Engine(url)` on PostgreSQL beside `workers=200` and a raw commit, and
    runs/s through `cairn worker --transport celery` beside cairn's own worker."""
    from bench import celery_transport, defaults

    report: dict[str, Any] = {}
    reason = postgres.problem() if postgres_too else "--no-postgres"
    if reason is None:
        note(f"postgres: default Engine(url) beside workers=200, {DEFAULTS_ROUNDS} rounds each")
        with postgres.fresh_database() as url:
            report["postgres_default_engine"] = defaults.measure(
                url, lambda: raw.postgres_commit_us(url, commits=200), DEFAULTS_ROUNDS
            )
    else:
        report["postgres_default_engine"] = {"skipped": reason}
    note(f"celery transport beside cairn's own worker, {TRANSPORT_ROUNDS} rounds")
    report["celery"] = celery_transport.beside_own(
        TRANSPORT_RUNS, TRANSPORT_ROUNDS, folder, postgres_too=postgres_too
    )
    return report


def defaults_and_transports_table(report: dict[str, Any]) -> str:
    lines = ["", ""]
    engines = report["postgres_default_engine"]
    if "skipped" in engines:
        lines.append(f"PostgreSQL default Engine: skipped ({engines['skipped']})")
    else:
        lines.append(f"PostgreSQL, {CONCURRENT_RUNS} ten-step runs at once (target >= 1,500 runs/s")
        lines.append("with a default Engine(url), <= 0.2x), rounds alternating:")
        for name, data in engines.items():
            lines.append(
                f"  {name:<20} {data['runs_per_second']:>7,.0f} runs/s"
                f"  {data['us_per_step']:>6.1f} µs/step"
                f"  {data['ratio_to_raw_commit']:.2f}x a raw commit"
                f" ({data['raw_commit_us']:.0f} µs)"
            )
    lines.append(
        f"cairn worker --transport celery, {TRANSPORT_RUNS} ten-step runs, concurrency 32"
        " (target >= 0.8x cairn's own worker):"
    )
    for kind, brokers in report["celery"].items():
        for label, data in brokers.items():
            own = statistics.median(data["own_runs_per_second"])
            through = statistics.median(data["celery_runs_per_second"])
            lines.append(
                f"  {kind:<9} {label:<18} {through:>7,.0f} runs/s vs own {own:>7,.0f}"
                f"  ratio {data['ratio']:.2f}x"
            )
    return "\n".join(lines)


# --- end of issue 36's block ---


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--no-postgres", action="store_true", help="measure SQLite only")
    parser.add_argument(
        "--no-transports",
        action="store_true",
        help="leave out the default Engine on PostgreSQL and the Celery transport",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cairn-bench-") as tmp:
        folder = Path(tmp)
        report: dict[str, Any] = {
            "machine": {
                "python": platform.python_version(),
                "sqlite": sqlite3.sqlite_version,
                "cpus": os.cpu_count(),
            },
            "sqlite": run_sqlite(folder),
            "postgres": (
                {"skipped": "--no-postgres"} if args.no_postgres else run_postgres(folder)
            ),
        }
        if not args.no_transports:
            report["defaults_and_transports"] = run_defaults_and_transports(
                folder, postgres_too=not args.no_postgres
            )
    report["seconds"] = time.perf_counter() - started
    text = table(report)
    if "defaults_and_transports" in report:
        text += defaults_and_transports_table(report["defaults_and_transports"])
    print(json.dumps(report, indent=2) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
