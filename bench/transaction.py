"""`python -m bench.transaction [STEPS]`: what a `@cairn.transaction` step costs on SQLite.

In one sitting, on one SQLite file with the store's pragmas: a raw INSERT + COMMIT (the
floor), a plain `@cairn.step` that does nothing (the checkpoint alone), a plain step that
INSERTs and commits on a connection of its own (the at-least-once way to write a row),
and `@cairn.transaction` steps (sync and async) that INSERT the row in the checkpoint's
transaction. Plain steps are measured sync (run in a thread) and async (on the loop).
Each workflow runs STEPS steps in a loop (default 300); a figure is the median of 5
rounds of wall time per step; ratios are against the raw commit and the plain step.
"""

from __future__ import annotations

import asyncio
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cairn
from bench import raw

ROUNDS = 5
APP_DB = {"path": ""}  # the file of the "own connection" step, set by main
_own: dict[str, sqlite3.Connection] = {}


def note(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


@cairn.step("bench.noop")
def noop(i: int) -> int:
    return i


@cairn.step("bench.anoop")
async def anoop(i: int) -> int:
    return i


@cairn.step("bench.own_commit")
def own_commit(i: int) -> int:
    conn = _own.get("conn")
    if conn is None:
        conn = _own["conn"] = sqlite3.connect(
            APP_DB["path"], isolation_level=None, timeout=30, check_same_thread=False
        )
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO ledger (i) VALUES (?)", (i,))
    conn.execute("COMMIT")
    return i


@cairn.transaction(name="bench.txn")
def txn(conn: sqlite3.Connection, i: int) -> int:
    conn.execute("INSERT INTO ledger (i) VALUES (?)", (i,))
    return i


@cairn.transaction(name="bench.atxn")
async def atxn(conn: sqlite3.Connection, i: int) -> int:
    conn.execute("INSERT INTO ledger (i) VALUES (?)", (i,))
    return i


STEPS: dict[str, Any] = {
    "noop": noop,
    "noop_async": anoop,
    "own_commit": own_commit,
    "transaction": txn,
    "transaction_async": atxn,
}


@cairn.workflow(name="bench.transaction_loop")
async def loop(kind: str, steps: int) -> int:
    step = STEPS[kind]
    total = 0
    for i in range(steps):
        total += await step(i)
    return total


async def per_step_us(engine: cairn.Engine, kind: str, steps: int) -> float:
    """µs of wall time per step of one run of `steps` steps of `kind`."""
    started = time.perf_counter()
    run = await engine.start(loop, kind, steps)
    await run.result(timeout=600)
    return (time.perf_counter() - started) / steps * 1e6


async def measure(folder: Path, steps: int) -> dict[str, float]:
    db = folder / "cairn.db"
    APP_DB["path"] = str(folder / "app.db")
    for path in (str(db), APP_DB["path"]):
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS ledger (i INTEGER)")
        conn.close()
    figures: dict[str, list[float]] = {kind: [] for kind in STEPS}
    async with cairn.Engine(f"sqlite:///{db}", workers=4) as engine:
        for kind in STEPS:  # warm up
            await per_step_us(engine, kind, 50)
        for round_ in range(ROUNDS):
            note(f"round {round_ + 1}/{ROUNDS}")
            for kind in STEPS:  # interleaved, so drift hits every kind alike
                figures[kind].append(await per_step_us(engine, kind, steps))
    result = {kind: statistics.median(values) for kind, values in figures.items()}
    result["raw_commit"] = raw.sqlite_commit_us(str(folder / "raw.db"))
    return result


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    with tempfile.TemporaryDirectory() as folder:
        figures = asyncio.run(measure(Path(folder), steps))
    floor = figures["raw_commit"]
    print(f"SQLite, {steps} sequential steps per run, median of {ROUNDS} rounds")
    print(f"{'':36}{'µs/step':>10}{'x raw':>8}{'x step':>8}")
    # "x step": against the empty @cairn.step of the same kind (sync steps run in a thread).
    labels = [
        ("raw INSERT + COMMIT", "raw_commit", "noop"),
        ("@cairn.step, empty (sync)", "noop", "noop"),
        ("@cairn.step, empty (async)", "noop_async", "noop_async"),
        ("@cairn.step + own INSERT/COMMIT", "own_commit", "noop"),
        ("@cairn.transaction INSERT (sync)", "transaction", "noop"),
        ("@cairn.transaction INSERT (async)", "transaction_async", "noop_async"),
    ]
    for label, key, step in labels:
        value = figures[key]
        print(f"{label:36}{value:10.1f}{value / floor:8.1f}{value / figures[step]:8.2f}")


if __name__ == "__main__":
    main()
