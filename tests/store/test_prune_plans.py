"""SQLite only: the plans of a prune batch's statements (a batch must not cost a scan).

SQLite keeps no statistics: given `run_id IN (...) AND status IN (...)`, it took the
status index and read every finished run of the database for each batch. With 100,000
finished runs the batch's DELETE of 50 runs took 22 ms instead of 0.9 ms, on the event
loop, and a prune was quadratic in the number of finished runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from cairn.store import sqlite_path
from cairn.store.programs import prune
from cairn.store.programs import runs as run_ops
from cairn.store.records import PruneQuery
from cairn.store.sqlite import connections
from cairn.store.sqlite.store import SqliteStore

from .kit import T0, run_record

OLD = T0 - 100 * 86400


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(sqlite_path(sqlite_url))
    await store.open()
    yield store
    await store.close()


async def test_prune__a_batch_reads_runs_by_id_or_by_finish_time_never_by_status(
    sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(60):  # with a handful of ids, SQLite prefers the primary key anyway
        status = "FAILED" if i % 2 else "COMPLETED"
        record = run_record(
            f"r{i}", status=status, created_at=OLD - 10, finished_at=OLD + i, parent_id="p"
        )
        await sqlite_store.write(run_ops.create_run(record))
    await sqlite_store.write(
        run_ops.create_run(run_record("p", status="COMPLETED", finished_at=OLD))
    )
    # Bound parameters, as the store runs them: with literals SQLite plans otherwise.
    statements: list[tuple[str, Sequence[Any]]] = []

    def execute(conn: sqlite3.Connection, text: str, params: Sequence[Any]) -> sqlite3.Cursor:
        statements.append((text, params))
        return conn.execute(text, params)

    monkeypatch.setattr(connections, "execute", execute)
    query = PruneQuery(T0 - 30 * 86400, None, None)
    done = await sqlite_store.write(prune.prune_runs(query, limit=100))
    assert done.count == 61  # every statement of a batch that deletes ran

    reads = {}
    for text, params in statements:
        if text.startswith(("SELECT", "DELETE", "WITH")) and " runs " in f"{text} ":
            plan = sqlite_store.conn.execute(f"EXPLAIN QUERY PLAN {text}", params).fetchall()
            reads[text] = [row[3] for row in plan if " runs " in f"{row[3]} "]
    assert any(text.startswith("DELETE FROM runs") for text in reads), statements
    by_status = {
        text: plan
        for text, plan in reads.items()
        if not all(
            "(run_id=?)" in s or "runs_by_parent" in s or "runs_by_finished" in s for s in plan
        )
    }
    assert not by_status, by_status
