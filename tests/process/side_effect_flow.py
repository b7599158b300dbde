"""A ten-step workflow whose steps leave proof outside the store.

Each step inserts (run, step) into a side-effect SQLite file with a UNIQUE constraint. A
second execution of a step cannot insert again: it appends the clash to a duplicates log
(with the pid of the first and second executor) and goes on, so the test can tell exactly
which steps ran twice and where.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3

import cairn

SIDE_DB = os.environ.get("CAIRN_SIDE_DB", "side.db")
STEP_DELAY = float(os.environ.get("CAIRN_STEP_DELAY", "0"))


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(SIDE_DB, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS effects (run_id TEXT, step INTEGER, pid INTEGER, "
        "UNIQUE (run_id, step))"
    )
    conn.execute(
        "CREATE TABLE IF NOT EXISTS duplicates (run_id TEXT, step INTEGER, first_pid INTEGER, "
        "second_pid INTEGER)"
    )
    return conn


def record_effect(run_id: str, step: int) -> None:
    conn = _connect()
    try:
        conn.execute("INSERT INTO effects VALUES (?, ?, ?)", (run_id, step, os.getpid()))
    except sqlite3.IntegrityError:
        (first,) = conn.execute(
            "SELECT pid FROM effects WHERE run_id = ? AND step = ?", (run_id, step)
        ).fetchone()
        conn.execute(
            "INSERT INTO duplicates VALUES (?, ?, ?, ?)", (run_id, step, first, os.getpid())
        )
    finally:
        conn.close()


@cairn.step(name="effect")
async def effect(step: int) -> int:
    run_id = cairn.current_run().run_id
    await asyncio.to_thread(record_effect, run_id, step)
    if STEP_DELAY:
        await asyncio.sleep(STEP_DELAY)
    return step


@cairn.workflow(name="side.ten")
async def ten_effects(n: int) -> int:
    total = 0
    for step in range(10):
        total += await effect(step)
    return total + n
