"""`python -m bench.run_statements`: what a plain run's two SQLite statements write.

A run started and executed by one engine is one INSERT into `runs` (stored RUNNING and
owned) and one UPDATE that finishes it, each its own commit. This runs exactly those
statements, with BEGIN IMMEDIATE and COMMIT, on a copy of a database cairn created (over
PRIOR finished runs of a few workflows, statuses and origins), and prints the WAL frames
each commit writes (the -wal file's growth; one frame per page) and, under `valgrind
--tool=callgrind`, the instructions of the two (RUNS runs, less the same process with
the statements left out):

    python -m bench.run_statements [--runs 300] [--prior 100000] [--sql "DROP INDEX ..."]

`--sql` runs statements on the copy first (then VACUUM), to price an index by dropping
it. `--no-count` prints the frames alone (no valgrind).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import cairn
from bench import instructions
from cairn.store import _sql
from cairn.store.records import RunRecord
from cairn.store.sqlite.connections import connect

WORKFLOWS = ("orders.ship", "billing.charge", "mail.send", "reports.build")
ORIGINS = ("api",) * 8 + ("schedule", "child")
STATUSES = ("COMPLETED",) * 17 + ("FAILED", "CANCELLED", "WAITING")
OWNER = "bench-run-statements"


def run_id(at: float) -> str:
    """An id as cairn makes them: creation milliseconds, then random bits."""
    return f"{int(at * 1000):012x}{os.urandom(10).hex()}"


def prepare(path: str, prior: int, sql: list[str]) -> None:
    """A database cairn created at `path`, holding `prior` runs, `sql` run on it."""

    async def create() -> None:
        async with cairn.Engine(f"sqlite:///{path}", workers=1):
            pass

    asyncio.run(create())
    conn = connect(path, busy_ms=5_000)
    start = time.time() - prior * 0.05
    rows = []
    for i in range(prior):
        at = start + i * 0.05
        status = random.choice(STATUSES)
        done = status != "WAITING"
        run = RunRecord(
            run_id=run_id(at),
            workflow=random.choice(WORKFLOWS),
            status=status,
            args=f'{{"args":[{i}],"kwargs":{{}}}}',
            created_at=at,
            updated_at=at + 0.01,
            result=str(i) if status == "COMPLETED" else None,
            started_at=at,
            finished_at=at + 0.01 if done else None,
            attempt=1,
            fence=1,
            origin=random.choice(ORIGINS),
            wake_at=None if done else at + 3600,
        )
        rows.append(_sql.run_params(run))
    conn.execute("BEGIN")
    conn.executemany(_sql.INSERT_RUN, rows)
    conn.execute("COMMIT")
    for statement in sql:
        conn.execute(statement)
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def statements(runs: int) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """The parameters of `runs` runs' INSERT and finishing UPDATE, as the engine binds them."""
    now = time.time()
    pairs = []
    for i in range(runs):
        at = now + i * 0.001
        run = RunRecord(
            run_id=run_id(at),
            workflow="bench.no_steps",
            status="RUNNING",
            args=f'{{"args":[{i}],"kwargs":{{}}}}',
            created_at=at,
            updated_at=at,
            started_at=at,
            attempt=1,
            fence=1,
            owner=OWNER,
            origin="api",
        )
        finish = ("COMPLETED", str(i), None, at, at, run.run_id, OWNER, 1)
        pairs.append((_sql.run_params(run), finish))
    return pairs


def execute(path: str, runs: int, part: str, frames: bool) -> None:
    """One counted process: `runs` runs' statements on a copy of `path` (`part`: which)."""
    folder = tempfile.mkdtemp()
    copy = os.path.join(folder, "copy.db")
    shutil.copy(path, copy)
    conn = connect(copy, busy_ms=5_000)  # as the engine's writer: WAL, NORMAL, 64 MiB
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA cache_size=-65536")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("SELECT COUNT(*) FROM runs").fetchone()
    pairs = statements(runs)
    wal = copy + "-wal"
    page = int(conn.execute("PRAGMA page_size").fetchone()[0]) + 24
    grown = [0, 0]
    for insert, finish in pairs if part != "none" else ():
        before = os.path.getsize(wal) if frames else 0
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_sql.INSERT_RUN, insert)
        conn.execute("COMMIT")
        middle = os.path.getsize(wal) if frames else 0
        if part == "both":
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_sql.FINISH_RUN, finish)
            conn.execute("COMMIT")
        grown[0] += middle - before
        grown[1] += (os.path.getsize(wal) if frames else 0) - middle
    if frames:
        insert_frames, finish_frames = (g / page / runs for g in grown)
        print(f"WAL frames per commit: insert {insert_frames:.2f}, finish {finish_frames:.2f}")
    shutil.rmtree(folder)
    os._exit(0)  # no close: its checkpoint would be counted


def count(path: str, runs: int, part: str) -> int:
    """Instructions of one `execute` process, counted by callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "callgrind.out")
        code = f"import bench.run_statements as b; b.execute({path!r}, {runs}, {part!r}, False)"
        valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        subprocess.run(
            [*valgrind, sys.executable, "-c", code],
            env=dict(os.environ, PYTHONHASHSEED="0"),
            check=True,
            capture_output=True,
        )
        return instructions.callgrind_total(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="runs whose statements count")
    parser.add_argument("--prior", type=int, default=100_000, help="finished runs beforehand")
    parser.add_argument("--sql", action="append", default=[], help="run on the copy first")
    parser.add_argument("--no-count", action="store_true", help="WAL frames only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "prior.db")
        prepare(path, args.prior, args.sql)
        frames = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import bench.run_statements as b; b.execute({path!r}, {args.runs}, 'both', True)",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        print(f"{args.prior:,} prior runs {args.sql}: {frames.stdout.strip()}")
        if args.no_count:
            return
        none, insert, both = (count(path, args.runs, part) for part in ("none", "insert", "both"))
        first, second = (insert - none) / args.runs, (both - insert) / args.runs
        print(
            f"instructions: insert {first:,.0f}, finish {second:,.0f}, "
            f"both {first + second:,.0f} (with BEGIN IMMEDIATE and COMMIT each)"
        )


if __name__ == "__main__":
    main()
