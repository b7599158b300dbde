"""PostgreSQL only: a fenced write finds its run by its id, however many runs a worker holds.

A worker holding 200 runs once wrote every step batch through `runs_by_owner`, checking
each row against every run of that owner: with no statistics yet (a new database, or one
autovacuum has not analyzed), the planner's generic plan for the fence preferred the
small partial index on `owner` to the primary key. Batches of 200 steps then cost 3x on
the server, in about one round of `bench.ceiling` in three.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from cairn.store import _sql
from cairn.store.postgres import dialect
from cairn.store.postgres.store import PostgresStore

from .kit import T0

# The shared statements that carry the fence, and the bulk forms the store built of them.
FENCED = sorted(
    value
    for value in {v for v in vars(_sql).values() if isinstance(v, str)}
    if isinstance(value, str)
    and _sql.FENCE in value
    and value.startswith(("INSERT", "UPDATE", "DELETE", "SELECT", "WITH"))
)


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url)
    await store.open()
    yield store
    await store.close()


def _generic_plan(conn: psycopg.Connection[tuple[object, ...]], pg: str) -> str:
    numbered = dialect.numbered(pg)
    conn.execute(f"PREPARE fenced AS {numbered}")
    try:
        count = numbered.count("$")
        nulls = ", ".join(["NULL"] * count)
        rows = conn.execute(f"EXPLAIN EXECUTE fenced({nulls})").fetchall()
        return "\n".join(str(row[0]) for row in rows)
    finally:
        conn.execute("DEALLOCATE fenced")


def test_fenced_statements__are_found_in_this_module() -> None:
    assert _sql.INSERT_STEP_OWNED in FENCED and _sql.FINISH_RUN in FENCED
    assert len(FENCED) >= 7


async def test_fenced_writes__find_the_run_by_primary_key_when_a_worker_holds_many(
    pg_store: PostgresStore, pg_url: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # 300 runs held by one worker, in a database never analyzed.
        conn.execute(
            "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, owner, "
            "fence) SELECT 'run-' || n, 'tests.flow', 'RUNNING', '{}', %s, %s, 'worker-1', 1 "
            "FROM generate_series(1, 300) AS n",
            (T0, T0),
        )
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for text in FENCED:
            pg = dialect.program_statements(text, (), lock="")[-1][0]
            plan = _generic_plan(conn, pg)
            assert "runs_by_owner" not in plan and "runs_pkey" in plan, f"{pg}\n{plan}"
        # A batch's bulk form may join (a hash join over a small table is fine), as long as
        # it never looks runs up by their owner.
        bulks = [bulk.text for text, bulk in pg_store._bulk.items() if text in FENCED]
        assert len(bulks) >= 2
        for pg in bulks:
            plan = _generic_plan(conn, pg)
            assert "runs_by_owner" not in plan, f"{pg}\n{plan}"
