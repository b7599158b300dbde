"""Helpers of the store contract suite: records to store, and raw access for setup."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from cairn.store import Store, locations, sqlite_path
from cairn.store.records import AttemptRecord, Lease, RunRecord, StepRecord, WorkerRecord

T0 = 1_700_000_000.0  # a fixed "now" for runs; claims and leases compare against it
LEASE = 10.0


def is_sqlite(url: str) -> bool:
    """Whether `url` opens the SQLite store (sqlite:///, memory:// or file:///dir)."""
    return locations.scheme(url) in ("sqlite", "memory", "file")


def sqlite_connect(url: str, **options: Any) -> sqlite3.Connection:
    """A connection of its own to the SQLite database behind `url` (memory:// too)."""
    kind = locations.scheme(url)
    conn: sqlite3.Connection
    if kind == "memory":
        conn = sqlite3.connect(locations.memory_path(url), uri=True, **options)
    else:
        path = locations.file_path(url) if kind == "file" else sqlite_path(url)
        conn = sqlite3.connect(path, **options)
    return conn


def execute(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the database behind `url`, outside any store (for setup)."""
    if is_sqlite(url):
        with contextlib.closing(sqlite_connect(url)) as conn, conn:
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
    if owner is not None:
        values["fence"] = 1  # as a local start or a first claim leaves it
    values.update(fields)
    return RunRecord(run_id=run_id, status=status, owner=owner, **values)


def attempt_record(run_id: str, key: str, attempt: int) -> AttemptRecord:
    """A failed attempt of a step."""
    return AttemptRecord(run_id, key, attempt, "builtins.ValueError", "boom", "tb", T0, T0 + 1)


def held(owner: str, fence: int = 1) -> Lease:
    """The lease of an attempt of `owner` (fence 1: the run's first claim)."""
    return Lease(owner, fence)


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


def worker_record(worker_id: str, *, lease: float = LEASE) -> WorkerRecord:
    """A worker row (no process identity, so no process check applies).

    The store writes its times with the database's clock; `age_heartbeat` moves them.
    """
    return WorkerRecord(worker_id, "elsewhere", 1, 0.0, 0.0, concurrency=4, lease=lease)


def age_heartbeat(url: str, worker_id: str, seconds: float) -> None:
    """Make a worker's heartbeat `seconds` old by the database's clock (0: expired)."""
    import time

    when = time.time() - seconds if seconds else 0.0
    execute(url, "UPDATE workers SET heartbeat_at = ? WHERE worker_id = ?", (when, worker_id))


OpenStore = Callable[[], Awaitable[Store]]
