"""A statement about one run finds it by its id, whatever else it checks.

Without statistics (a new database, or one autovacuum has not analyzed yet) PostgreSQL's
generic plan for `run_id = $1 AND status = $2` may walk the status index instead of the
primary key, and for the fence (`run_id = $1 AND owner = $2 AND fence = $3`) the owner's
index: a claim then reads every PENDING run, and a batch of 200 step checkpoints read
every run of its worker per step (3x the server time, in a round of `bench.ceiling` in
three). The plans are cached per connection, so the cost stayed for the connection's life.
The other conditions are written so that no index serves them (`COALESCE(owner, '')`,
`status || ''`); these tests hold every such statement to its primary key.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator

import psycopg
import pytest

from cairn.store import _sql, open_store, sqlite_path
from cairn.store.postgres import dialect
from cairn.store.postgres.store import PostgresStore

from .kit import T0

BY_ID = re.compile(r"(FROM runs|UPDATE runs SET .*) WHERE run_id = \?")
# Holds only runs with an operator request not yet acted on: a handful, whatever the size.
SMALL_BY_DESIGN = {"runs_by_control"}


def _statements() -> dict[str, str]:
    found = {}
    for name, value in sorted(vars(_sql).items()):
        if isinstance(value, str) and value.startswith(("SELECT", "UPDATE", "INSERT", "DELETE")):
            if BY_ID.search(value):
                found[name] = value
    return found


BY_RUN_ID = _statements()


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url)
    await store.open()
    yield store
    await store.close()


def _generic_plan(conn: psycopg.Connection[tuple[object, ...]], pg: str) -> str:
    numbered = dialect.numbered(pg)
    conn.execute(f"PREPARE by_id AS {numbered}")
    try:
        count = len(set(re.findall(r"\$(\d+)", numbered)))
        nulls = ", ".join(["NULL"] * count)
        rows = conn.execute(f"EXPLAIN EXECUTE by_id({nulls})").fetchall()
        return "\n".join(str(row[0]) for row in rows)
    finally:
        conn.execute("DEALLOCATE by_id")


def _indexes(plan: str) -> set[str]:
    """The indexes of runs the plan walks, and "Seq Scan" if it reads the whole table."""
    used = set(re.findall(r"Scan (?:Backward )?using (\w+) on runs", plan))
    used |= set(re.findall(r"Bitmap Index Scan on (\w+)", plan))
    return used | ({"Seq Scan"} if re.search(r"Seq Scan on runs\b", plan) else set())


def test_statements_about_one_run__are_found_in_the_sql_module() -> None:
    for name in ("CLAIM_ONE", "FINISH_RUN", "INSERT_STEP_OWNED", "RELEASE_ONE", "SELECT_RUN"):
        assert name in BY_RUN_ID
    assert len(BY_RUN_ID) >= 25


async def test_statements_about_one_run__use_its_primary_key_in_a_database_never_analyzed(
    pg_store: PostgresStore, pg_url: str
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # A new database where every run shares what the other conditions test: one owner,
        # a status shared by many, an operator request, a version. 12,000 runs: on a few
        # hundred, a plan without statistics reads the whole table rather than an index
        # (cheaper there, and a Seq Scan fails the test whatever else the plan uses).
        for status in ("PENDING", "RUNNING", "SLEEPING", "WAITING", "PAUSED", "FAILED"):
            conn.execute(
                "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, "
                "owner, fence, control, version, wake_at) SELECT %s || n, 'tests.flow', %s, "
                "'{}', %s, %s, 'worker-1', 1, 'cancel', 'v1', %s "
                "FROM generate_series(1, 2000) AS n",
                (status, status, T0, T0, T0),
            )
        conn.execute("SET plan_cache_mode = force_generic_plan")
        wrong = {}
        for name, text in BY_RUN_ID.items():
            params = (None,) * text.count("?")
            pg = dialect.program_statements(text, params, lock="")[-1][0]
            used = _indexes(_generic_plan(conn, pg))
            allowed = {"runs_pkey"} | SMALL_BY_DESIGN
            if "parent_id = ?" in text:  # and a run's children, by their parent's id
                allowed.add("runs_by_parent")
            if not used or not used <= allowed:
                wrong[name] = sorted(used)  # another index, or none: a scan of the table
        assert wrong == {}

        # A batch's bulk form may join (a hash join over a small table is fine), as long as
        # it never walks another index of runs.
        bulks = [bulk.text for text, bulk in pg_store._bulk.items() if text in BY_RUN_ID.values()]
        assert len(bulks) >= 2
        for pg in bulks:
            assert _indexes(_generic_plan(conn, pg)) <= {"runs_pkey"}, pg


async def test_statements_about_one_run__use_its_primary_key_on_sqlite(sqlite_url: str) -> None:
    # SQLite prefers a unique equality anyway; this keeps the rewritten conditions honest.
    store = open_store(sqlite_url)
    await store.open()
    await store.close()
    with contextlib.closing(sqlite3.connect(sqlite_path(sqlite_url))) as conn:
        for name, text in BY_RUN_ID.items():
            plan = conn.execute(f"EXPLAIN QUERY PLAN {text}", (None,) * text.count("?"))
            on_runs = {row[3] for row in plan if " runs " in f"{row[3]} "}
            by_id = "SEARCH runs USING INDEX sqlite_autoindex_runs_1 (run_id=?)"
            allowed = {by_id}
            if "parent_id = ?" in text:  # and a run's children, by their parent's id
                allowed.add("SEARCH runs USING INDEX runs_by_parent (parent_id=?)")
            # One run by its id (a child checked against its parent too: the key alone).
            assert by_id in on_runs and on_runs <= allowed, (name, on_runs)
