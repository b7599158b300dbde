"""A workflow with one `@cairn.transaction` step, run in a real process the test kills.

    python transaction_worker.py URL MARKS --mode sync|async [--crash POINT] [--lease D]

The step inserts a row (run id, pid) into the application table `ledger`, which lives in
cairn's own database: the counter of how often its effect committed. POINT stops this
process where the test kills it with SIGKILL, after writing a marker file MARKS/POINT:

- ``before``: the step before it committed; the transaction step has not started;
- ``inside``: inside the step's function, right after its INSERT (not committed);
- ``before_commit``: the function returned and its checkpoint is about to commit with it;
- ``after_commit``: the step's row and checkpoint committed; the next step never starts;
- ``stall_inside``: inside the function after its INSERT, until the file MARKS/go exists
  (the test freezes the process meanwhile, so that another worker takes the run over).

Without POINT the process finds (or starts) the run, finishes it, prints its result as
one JSON line and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

import cairn
from cairn.store.records import StepRecord

RUN_ID = "txn-crash"
CRASH = ""
MARKS = Path(".")


def mark(point: str) -> None:
    """Leave proof (fsynced) that the process reached `point`."""
    with (MARKS / point).open("w", encoding="utf-8") as out:
        out.write(str(os.getpid()))
        out.flush()
        os.fsync(out.fileno())


def stop_here(point: str) -> None:
    """Where the test kills this process: mark the point and block this thread for good."""
    if CRASH == point:
        mark(point)
        threading.Event().wait()
    if CRASH == f"stall_{point}":
        mark(CRASH)
        while not (MARKS / "go").exists():
            time.sleep(0.01)


async def stop_here_async(point: str) -> None:
    """`stop_here` for an async function: only its task waits."""
    if CRASH == point:
        mark(point)
        await asyncio.Event().wait()
    if CRASH == f"stall_{point}":
        mark(CRASH)
        while not (MARKS / "go").exists():
            await asyncio.sleep(0.01)


@cairn.step("prepare")
def prepare() -> str:
    return "ready"


@cairn.transaction("book", retries=cairn.Retry(max_attempts=3, delay=0))
def book(conn: sqlite3.Connection | Any, run_id: str, placeholder: str) -> int:
    conn.execute(
        f"INSERT INTO ledger (run_id, pid) VALUES ({placeholder}, {placeholder})",
        (run_id, os.getpid()),
    )
    stop_here("inside")
    row = conn.execute(
        f"SELECT count(*) FROM ledger WHERE run_id = {placeholder}", (run_id,)
    ).fetchone()
    return int(row[0])


@cairn.transaction("abook", retries=cairn.Retry(max_attempts=3, delay=0))
async def abook(conn: Any, run_id: str, placeholder: str) -> int:
    insert = f"INSERT INTO ledger (run_id, pid) VALUES ({placeholder}, {placeholder})"
    count = f"SELECT count(*) FROM ledger WHERE run_id = {placeholder}"
    if isinstance(conn, sqlite3.Connection):
        conn.execute(insert, (run_id, os.getpid()))
        await stop_here_async("inside")
        return int(conn.execute(count, (run_id,)).fetchone()[0])
    await conn.execute(insert, (run_id, os.getpid()))
    await stop_here_async("inside")
    cursor = await conn.execute(count, (run_id,))
    row = await cursor.fetchone()
    return int(row[0])


@cairn.step("finish")
def finish(booked: int) -> int:
    return booked


@cairn.workflow("txn.crash")
async def flow(mode: str, placeholder: str) -> int:
    await prepare()
    if CRASH == "before":
        mark("before")
        await asyncio.Event().wait()
    step = book if mode == "sync" else abook
    booked = await step(cairn.current_run().run_id, placeholder)
    return await finish(booked)


def create_ledger(url: str) -> str:
    """Create the application table in cairn's database; the driver's placeholder."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)
        conn.execute("CREATE TABLE IF NOT EXISTS ledger (run_id TEXT, pid INTEGER)")
        conn.commit()
        conn.close()
        return "?"
    import psycopg

    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("CREATE TABLE IF NOT EXISTS ledger (run_id TEXT, pid INTEGER)")
    return "%s"


def on_step(point: str) -> Any:
    def hook(record: StepRecord) -> None:
        if record.name in ("book", "abook"):
            stop_here(point)

    return hook


async def main() -> int:
    global CRASH, MARKS
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("marks")
    parser.add_argument("--mode", choices=["sync", "async"], required=True)
    parser.add_argument("--crash", default="")
    parser.add_argument("--lease", default="30s")
    options = parser.parse_args()
    CRASH, MARKS = options.crash, Path(options.marks)
    async with cairn.Engine(options.url, workers=2, lease=options.lease) as engine:
        placeholder = create_ledger(options.url)
        assert engine.worker is not None
        engine.worker.env.before_commit = on_step("before_commit")
        engine.worker.env.commit_hook = on_step("after_commit")
        handle = await engine.start(flow, options.mode, placeholder, run_id=RUN_ID)
        result = await handle.result(timeout=100)  # a frozen worker's locks: 60 s at most
    print(json.dumps({"result": result, "pid": os.getpid()}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
