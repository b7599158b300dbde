"""Helpers of the store contract suite: records to store, and raw access for setup."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from cairn.store import Store, sqlite_path
from cairn.store.records import RunRecord, StepRecord, WorkerRecord

T0 = 1_700_000_000.0  # a fixed "now" for runs; claims and leases compare against it
LEASE = 10.0


def execute(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the database behind `url`, outside any store (for setup)."""
    if url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(sqlite_path(url))) as conn, conn:
            return conn.execute(sql, params).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql.replace("?", "%s"), params)
        return cursor.fetchall() if cursor.description else []


def run_record(
    run_id: str, *, status: str = "PENDING", owner: str | None = None, **fields: Any
) -> RunRecord:
    """A run as RunControl.start would store it."""
    values: dict[str, Any] = {
        "workflow": "tests.flow",
        "args": '{"args": [], "kwargs": {}}',
        "created_at": T0,
        "updated_at": T0,
        "attempt": 1 if status == "RUNNING" else 0,
        "started_at": T0 if status == "RUNNING" else None,
    }
    values.update(fields)
    return RunRecord(run_id=run_id, status=status, owner=owner, **values)


def step_record(run_id: str, seq: int, name: str = "add", **fields: Any) -> StepRecord:
    """A completed step outcome."""
    values: dict[str, Any] = {
        "key": f"{name}#{seq}",
        "kind": "step",
        "name": name,
        "status": "completed",
        "attempts": 1,
        "started_at": T0 + seq,
        "finished_at": T0 + seq,
        "result": str(seq),
    }
    values.update(fields)
    return StepRecord(run_id=run_id, seq=seq, **values)


def worker_record(worker_id: str, *, heartbeat_at: float = T0) -> WorkerRecord:
    """A worker row (on another host, so no process check applies)."""
    return WorkerRecord(worker_id, "elsewhere", 1, T0, heartbeat_at, concurrency=4)


OpenStore = Callable[[], Awaitable[Store]]
