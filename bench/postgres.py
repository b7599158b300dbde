"""PostgreSQL for the benchmark: whether it can run, a throw-away database, transaction counts."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator

SERVER = os.environ.get("CAIRN_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
ADMIN_DB = "postgres"


def problem() -> str | None:
    """Why the PostgreSQL half cannot run here, or None when it can."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'cairn-workflows[postgres]')"
    try:
        import cairn.store.postgres.store  # noqa: F401
    except ImportError as exc:
        return f"cairn.store.postgres.store is not importable yet ({exc})"
    try:
        with psycopg.connect(f"{SERVER}/{ADMIN_DB}", connect_timeout=3):
            pass
    except psycopg.Error as exc:
        return f"PostgreSQL at {SERVER} is unreachable: {str(exc).splitlines()[0]}"
    return None


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """Create `cairn_bench_<hex>`, yield its URL, drop it afterwards."""
    import psycopg

    name = f"cairn_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{SERVER}/{ADMIN_DB}", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{SERVER}/{name}"
    finally:
        with psycopg.connect(f"{SERVER}/{ADMIN_DB}", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def committed_transactions(url: str) -> int:
    """pg_stat_database.xact_commit of the database in `url`, once the count stops moving.

    Read from another database, so reading adds nothing. Backends report their counts
    when they exit or go idle, so wait (at most ~3 s) until two reads agree.
    """
    import psycopg

    database = url.rsplit("/", 1)[1]
    query = "SELECT xact_commit FROM pg_stat_database WHERE datname = %s"
    last = -1
    deadline = time.monotonic() + 3
    with psycopg.connect(f"{SERVER}/{ADMIN_DB}", autocommit=True) as conn:
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(query, (database,)).fetchone()
            count = int(row[0]) if row else 0
            if count == last or time.monotonic() > deadline:
                return count
            last = count
            time.sleep(0.3)
