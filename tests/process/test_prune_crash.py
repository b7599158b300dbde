"""`cairn runs prune` killed with SIGKILL mid-way: the database stays consistent (both stores).

Each batch is one transaction deleting a run and every row it owns, so whatever moment
the process dies at, a run is either whole (its row and all its rows) or gone entirely.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.store import open_store, sqlite_path
from cairn.store.programs.prune import RUN_TABLES

from .test_cli import TIMEOUT, _env, cairn_cmd, one_error_line

pytestmark = pytest.mark.process

RUNS = 4000
OLD = time.time() - 100 * 86400

ROWS = {  # one row of each table per run: (columns, values after run_id)
    "run_columns": ("name, value, created_at", ("c", "1", 0)),
    "steps": (
        "seq, key, kind, name, status, attempts",
        (1, "add#1", "step", "add", "completed", 1),
    ),
    "step_attempts": (
        "execution, key, attempt, error_type, message, traceback, failed_at",
        (1, "add#1", 1, "E", "m", "tb", 0),
    ),
    "messages": ("channel, payload, created_at, consumed_by", ("event:x", "1", 0, "x#2")),
    "run_executions": ("execution, started_at, cause, from_seq", (2, 0, "retry", 1)),
    "retried_steps": (
        "execution, seq, key, kind, name, status, attempts",
        (1, 1, "add#1", "step", "add", "failed", 1),
    ),
    "stream_chunks": (
        "name, seq, kind, step_key, attempt, claim, value, created_at",
        ("tokens", 1, "chunk", "add#1", 1, 1, '"hi"', 0),
    ),
}


@contextlib.contextmanager
def connect(url: str) -> Iterator[Any]:
    if url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(sqlite_path(url), timeout=30)) as conn:
            yield conn
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def run_sql(url: str, conn: Any, sql: str, params: Any = ()) -> list[Any]:
    if not url.startswith("sqlite"):
        sql = sql.replace("?", "%s")
    cursor = conn.execute(sql, params)
    return list(cursor.fetchall()) if cursor.description else []


def fill(url: str) -> None:
    async def migrate() -> None:
        store = open_store(url)
        await store.open()
        await store.close()

    asyncio.run(migrate())
    ids = [f"run-{i:05}" for i in range(RUNS)]
    with connect(url) as conn:
        marks = "?" if url.startswith("sqlite") else "%s"

        def many(sql: str, rows: list[tuple[Any, ...]]) -> None:
            conn.cursor().executemany(sql.replace("?", marks), rows)

        many(
            "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, "
            "finished_at) VALUES (?, 'w', 'COMPLETED', '[]', ?, ?, ?)",
            [(run_id, OLD, OLD, OLD + i) for i, run_id in enumerate(ids)],
        )
        for table, (columns, values) in ROWS.items():
            qs = ", ".join("?" * (len(values) + 1))
            many(
                f"INSERT INTO {table} (run_id, {columns}) VALUES ({qs})",
                [(run_id, *values) for run_id in ids],
            )
        many(
            "INSERT INTO hooks (token, run_id, name, created_at) VALUES (?, ?, 'h', 0)",
            [(f"tok-{run_id}", run_id) for run_id in ids],
        )
        many(
            "INSERT INTO tasks (task_id, run_id, name, title, status, created_at) "
            "VALUES (?, ?, 't', 'T', 'submitted', 0)",
            [(f"task-{run_id}", run_id) for run_id in ids],
        )
        many(
            "INSERT INTO step_tasks (task_id, run_id, key, attempt, step, queue, status, "
            "created_at) VALUES (?, ?, 'add#1', 1, 'add', 'gpu', 'done', 0)",
            [(f"st-{run_id}", run_id) for run_id in ids],
        )
        if url.startswith("sqlite"):
            conn.commit()


def count_runs(url: str) -> int:
    with connect(url) as conn:
        return int(run_sql(url, conn, "SELECT COUNT(*) FROM runs")[0][0])


def assert_consistent(url: str) -> int:
    """Every remaining run has all its rows; no table has a row of a run that is gone."""
    with connect(url) as conn:
        runs = int(run_sql(url, conn, "SELECT COUNT(*) FROM runs")[0][0])
        for table in RUN_TABLES:
            orphans = run_sql(
                url,
                conn,
                f"SELECT COUNT(*) FROM {table} t WHERE NOT EXISTS "
                "(SELECT 1 FROM runs r WHERE r.run_id = t.run_id)",
            )[0][0]
            assert orphans == 0, f"{orphans} orphan rows in {table}"
            rows = run_sql(url, conn, f"SELECT COUNT(*) FROM {table}")[0][0]
            assert rows == runs, f"{table}: {rows} rows for {runs} runs (a half-deleted run)"
    return runs


def test_prune__killed_mid_way_leaves_whole_runs_or_none(store_url: str, tmp_path: Path) -> None:
    fill(store_url)
    assert assert_consistent(store_url) == RUNS

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cairn.cli.main",
            "runs",
            "prune",
            "--older-than",
            "30d",
            "--batch",
            "10",
            "--db",
            store_url,
        ],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + TIMEOUT
        while count_runs(store_url) > RUNS - 200:  # some batches committed
            assert proc.poll() is None, "prune ended before it was killed"
            assert time.monotonic() < deadline, "prune deleted nothing"
            time.sleep(0.005)
        proc.kill()  # SIGKILL: mid-way through its batches, maybe mid-transaction
    finally:
        proc.kill()
        proc.communicate()
    left = assert_consistent(store_url)
    assert 0 < left <= RUNS - 200

    again = cairn_cmd(tmp_path, "runs", "prune", "--older-than", "30d", "--db", store_url)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"deleted {left} finished runs"
    assert assert_consistent(store_url) == 0


def test_prune__dry_run_counts_and_deletes_nothing(store_url: str, tmp_path: Path) -> None:
    fill(store_url)

    proc = cairn_cmd(
        tmp_path, "runs", "prune", "--older-than", "30d", "--dry-run", "--db", store_url
    )
    young = cairn_cmd(
        tmp_path, "runs", "prune", "--older-than", "200d", "--dry-run", "--db", store_url
    )

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"would delete {RUNS} finished runs"
    assert young.stdout.strip() == "would delete 0 finished runs"
    assert assert_consistent(store_url) == RUNS


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "soon"], "invalid duration for --older-than: 'soon'"),
        (["--older-than", "0s"], "--older-than must be longer than zero"),
        (["--older-than", "2 months"], "months and years vary in length"),
        (["--older-than", "1d", "--status", "RUNNING"], "--status RUNNING is not a finished"),
        (["--older-than", "1d", "--status", "DONE"], "unknown run status 'DONE'"),
        (["--older-than", "1d", "--batch", "0"], "--batch must be a positive integer"),
    ],
)
def test_prune__bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    db = f"sqlite:///{tmp_path / 'cairn.db'}"
    proc = cairn_cmd(tmp_path, "runs", "prune", *args, "--db", db)

    assert proc.returncode != 0
    assert message in one_error_line(proc)
    assert not (tmp_path / "cairn.db").exists()  # refused before opening the database
