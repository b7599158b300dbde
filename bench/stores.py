"""Running a benchmark on each store: SQLite in a temporary folder, then PostgreSQL."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from bench import postgres


def on_each_store(
    prefix: str,
    sqlite: Callable[[Path], None] | None,
    on_postgres: Callable[[str], None] | None,
) -> int:
    """`sqlite(folder)` in a fresh temporary folder, then `on_postgres(url)` in a fresh
    database when a server is reachable (else says why not); None skips that store."""
    if sqlite is not None:
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            sqlite(Path(tmp))
    if on_postgres is None:
        return 0
    reason = postgres.problem()
    if reason is not None:
        print(f"PostgreSQL skipped: {reason}")
        return 0
    with postgres.fresh_database() as url:
        on_postgres(url)
    return 0
