"""Raw commit baselines: the floor a durable step is measured against."""

from __future__ import annotations

import sqlite3
import statistics
import time


def sqlite_commit_us(path: str, *, commits: int = 3000) -> float:
    """µs per small INSERT + COMMIT with SqliteStore's pragmas (WAL, NORMAL); median of 3 rounds."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, k TEXT, v TEXT)")
    row = ("run-0123456789abcdef#1", '{"value": 42}')

    def batch(n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO raw (k, v) VALUES (?, ?)", row)
            conn.execute("COMMIT")
        return time.perf_counter() - started

    batch(200)  # warm up
    elapsed = statistics.median(batch(commits) for _ in range(3))
    conn.close()
    return elapsed / commits * 1e6


def postgres_commit_us(url: str, *, commits: int = 1000) -> float:
    """µs of one small INSERT committed on its own (autocommit: one round trip)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS raw (id BIGSERIAL PRIMARY KEY, k TEXT, v TEXT)")
        row = ("run-0123456789abcdef#1", '{"value": 42}')

        def batch(n: int) -> float:
            started = time.perf_counter()
            for _ in range(n):
                conn.execute("INSERT INTO raw (k, v) VALUES (%s, %s)", row)
            return time.perf_counter() - started

        batch(100)
        elapsed = statistics.median(batch(commits) for _ in range(3))
        conn.execute("DROP TABLE raw")
    return elapsed / commits * 1e6
