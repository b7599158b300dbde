"""Migrations: applied once, concurrently safe, refused when newer, the same on both dialects."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

import pytest

from cairn.errors import SchemaTooNew, StoreError
from cairn.store import RunQuery, _sql, migrate, open_store, sqlite_path
from cairn.store.programs import control, journal, waits
from cairn.store.programs import runs as run_ops

from .kit import execute


def shipped(dialect: str) -> list[tuple[int, str]]:
    return [(m.version, m.name) for m in migrate.available(dialect)]


def dialect_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgres"


async def test_open__applies_every_migration_once(empty_url: str) -> None:
    for _ in range(2):
        store = open_store(empty_url)
        await store.open()
        await store.close()

    rows = execute(empty_url, "SELECT version, name FROM cairn_migrations ORDER BY version")
    assert [tuple(row) for row in rows] == shipped(dialect_of(empty_url))


async def test_open__processes_starting_together_migrate_once(empty_url: str) -> None:
    stores = [open_store(empty_url) for _ in range(5)]

    await asyncio.gather(*(store.open() for store in stores))
    for store in stores:
        await store.close()

    rows = execute(empty_url, "SELECT version FROM cairn_migrations ORDER BY version")
    assert [row[0] for row in rows] == [v for v, _ in shipped(dialect_of(empty_url))]


async def test_open__a_schema_newer_than_the_code_is_refused(empty_url: str) -> None:
    store = open_store(empty_url)
    await store.open()
    await store.close()
    execute(
        empty_url,
        "INSERT INTO cairn_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        (9999, "from_the_future", 0.0),
    )

    with pytest.raises(SchemaTooNew, match="schema version 9999"):
        await open_store(empty_url).open()


async def test_migration_12__gives_column_rows_their_runs_created_at(empty_url: str) -> None:
    # A database at schema 11 with columns set, as a deployment before 12 left it.
    migrate_up_to(empty_url, 11)
    for i, customer in enumerate(['"ann"', '"bob"', '"ann"']):
        execute(
            empty_url,
            "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at) "
            "VALUES (?, 'w', 'PENDING', '{}', ?, ?)",
            (f"r{i}", 100.0 + i, 100.0 + i),
        )
        execute(
            empty_url,
            "INSERT INTO run_columns (run_id, name, value) VALUES (?, 'customer', ?)",
            (f"r{i}", customer),
        )

    store = open_store(empty_url)
    await store.open()
    try:
        found = await store.read(run_ops.list_runs(RunQuery(columns={"customer": '"ann"'})))
    finally:
        await store.close()

    assert [run.run_id for run in found] == ["r2", "r0"]
    rows = execute(empty_url, "SELECT run_id, created_at FROM run_columns ORDER BY run_id")
    assert [tuple(row) for row in rows] == [("r0", 100.0), ("r1", 101.0), ("r2", 102.0)]


async def test_migration_13__older_steps_and_attempts_have_no_input_or_start(
    empty_url: str,
) -> None:
    migrate_up_to(empty_url, 12)
    execute(
        empty_url,
        "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at) "
        "VALUES ('r1', 'w', 'FAILED', '{}', 100, 100)",
    )
    execute(
        empty_url,
        "INSERT INTO steps (run_id, seq, key, kind, name, status, attempts, started_at, "
        "finished_at, result) VALUES ('r1', 1, 'add#1', 'step', 'add', 'completed', 1, 100, "
        "101, '2')",
    )
    execute(
        empty_url,
        "INSERT INTO step_attempts (run_id, key, attempt, error_type, message, traceback, "
        "failed_at) VALUES ('r1', 'add#2', 1, 'builtins.ValueError', 'no', '', 102)",
    )

    store = open_store(empty_url)
    await store.open()
    try:
        [step] = await store.read(journal.load_journal("r1", inputs=True))
        [attempt] = await store.read(journal.load_attempts("r1"))
    finally:
        await store.close()

    assert (step.result, step.input) == ("2", None)
    assert (attempt.failed_at, attempt.started_at) == (102.0, None)


async def test_migration_14__a_run_parked_before_it_still_wakes_for_its_message(
    empty_url: str,
) -> None:
    # Parked WAITING at schema 13: what its waits take was not kept, so any message wakes
    # it (once: it keeps its channels when it parks again).
    migrate_up_to(empty_url, 13)
    execute(
        empty_url,
        "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, attempt) "
        "VALUES ('old', 'w', 'WAITING', '{}', 100, 100, 1)",
    )

    store = open_store(empty_url)
    await store.open()
    try:
        sent = await store.write(
            waits.send_message("old", "event:go", "1", idempotency_key=None, now=200)
        )
        run = await store.read(run_ops.get_run("old"))
    finally:
        await store.close()

    assert sent is not None and (sent.status, sent.woken, sent.waits_on) == ("WAITING", True, None)
    assert run is not None and (run.wake_at, run.waits_on, run.futile_wakes) == (200, None, 0)


async def test_migration_15__older_attempts_are_failed_attempts_of_execution_1(
    empty_url: str,
) -> None:
    migrate_up_to(empty_url, 14)
    execute(
        empty_url,
        "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at) "
        "VALUES ('r1', 'w', 'FAILED', '{}', 100, 100)",
    )
    for attempt in (1, 2):
        execute(
            empty_url,
            "INSERT INTO step_attempts (run_id, key, attempt, error_type, message, traceback, "
            "failed_at, started_at) VALUES ('r1', 'add#1', ?, 'builtins.ValueError', 'no', "
            "'tb', 102, 101)",
            (attempt,),
        )

    store = open_store(empty_url)
    await store.open()
    try:
        attempts = await store.read(journal.load_attempts("r1"))
        run = await store.read(run_ops.get_run("r1"))
        retried = await store.write(control.retry_run("r1", now=200.0, by="ada"))
        lineage = await store.read(control.load_lineage("r1"))
    finally:
        await store.close()

    assert [(a.execution, a.attempt, a.outcome, a.worker, a.started_at) for a in attempts] == [
        (1, 1, "failed", None, 101.0),
        (1, 2, "failed", None, 101.0),
    ]
    assert run is not None and (run.execution, run.restarted_from, run.forked_from) == (
        1,
        None,
        None,
    )
    assert retried and [e.execution for e in lineage.executions] == [2]


async def test_migration_16__older_runs_get_the_origin_their_row_tells(empty_url: str) -> None:
    migrate_up_to(empty_url, 15)
    rows = [
        ("plain", None, None, None),
        ("child", "plain", None, None),
        ("next", "plain", "child", None),  # a child's successor: continue_as_new wins
        ("ticked", None, None, 100.0),
    ]
    for run_id, parent, continued, scheduled in rows:
        execute(
            empty_url,
            "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, "
            "parent_id, continued_from, scheduled_at) "
            "VALUES (?, 'w', 'PENDING', '{}', 100, 100, ?, ?, ?)",
            (run_id, parent, continued, scheduled),
        )

    store = open_store(empty_url)
    await store.open()
    try:
        found = {r: (await store.read(run_ops.get_run(r))).origin for r, *_ in rows}  # type: ignore[union-attr]
        unknown = await store.read(run_ops.list_runs(RunQuery(origin="unknown")))
    finally:
        await store.close()

    assert found == {"plain": None, "child": "parent", "next": "continue", "ticked": "schedule"}
    assert [run.run_id for run in unknown] == ["plain"]


async def test_migration_21__forgets_emit_keys_whose_runs_were_all_pruned(empty_url: str) -> None:
    # Prune before schema 21 deleted a keyed emit's runs but kept its key, so emitting the
    # key again started nothing, for ever. A key with one of its runs left stays.
    migrate_up_to(empty_url, 20)
    keys = [
        ("order.created", "gone", '["emit:order.created:gone:a", "emit:order.created:gone:b"]'),
        ("order.created", "half", '["emit:order.created:half:a", "emit:order.created:half:b"]'),
        ("order.created", "kept", '["emit:order.created:kept:a"]'),
    ]
    for event_type, key, run_ids in keys:
        execute(
            empty_url,
            "INSERT INTO emit_keys (event_type, key, run_ids, created_at) VALUES (?, ?, ?, 100)",
            (event_type, key, run_ids),
        )
    for run_id in ("emit:order.created:half:b", "emit:order.created:kept:a"):
        execute(
            empty_url,
            "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at) "
            "VALUES (?, 'w', 'COMPLETED', '{}', 100, 100)",
            (run_id,),
        )

    store = open_store(empty_url)
    await store.open()
    await store.close()

    left = execute(empty_url, "SELECT key FROM emit_keys ORDER BY key")
    assert [row[0] for row in left] == ["half", "kept"]


async def test_migration_27__runs_held_before_are_still_found_by_their_worker(
    empty_url: str,
) -> None:
    # A database at schema 26 with a run held by worker w1, as a deployment left it.
    migrate_up_to(empty_url, 26)
    execute(
        empty_url,
        "INSERT INTO runs (run_id, workflow, status, args, created_at, updated_at, owner, "
        "fence) VALUES ('r1', 'w', 'RUNNING', '{}', 1.0, 1.0, 'w1', 3)",
    )

    store = open_store(empty_url)
    await store.open()
    await store.close()

    assert [tuple(row) for row in execute(empty_url, _sql.SELECT_OWNED, ("w1",))] == [("r1", 3)]
    indexes = sqlite_schema(empty_url) if dialect_of(empty_url) == "sqlite" else None
    assert indexes is None or "runs_by_owner" not in indexes["indexes"]


def migrate_up_to(url: str, version: int) -> None:
    """Apply the migrations up to `version`, as a deployment of that schema left it."""
    execute(url, migrate.TABLE_SQL)
    for migration in migrate.available(dialect_of(url)):
        if migration.version > version:
            break
        for statement in migrate.statements(migration.sql):
            execute(url, statement)
        execute(
            url,
            "INSERT INTO cairn_migrations (version, name, applied_at) VALUES (?, ?, 0)",
            (migration.version, migration.name),
        )


async def test_open__unreachable_postgres_is_named_without_its_password() -> None:
    pytest.importorskip("psycopg")
    url = "postgresql://someone:s3cret@127.0.0.1:1/nowhere"

    with pytest.raises(StoreError) as caught:
        await open_store(url).open()

    assert "127.0.0.1:1/nowhere" in str(caught.value)
    assert "s3cret" not in str(caught.value)


async def test_migrations__same_tables_and_columns_on_both_dialects(
    sqlite_url: str, pg_url: str
) -> None:
    store = open_store(sqlite_url)
    await store.open()
    await store.close()

    schema = sqlite_schema(sqlite_url)
    assert {"runs", "steps", "workers", "cairn_migrations"} <= set(schema["tables"])
    postgres = postgres_schema(pg_url)
    assert schema["tables"] == postgres["tables"]
    assert set(schema["indexes"]) == set(postgres["indexes"]) - POSTGRES_ONLY_INDEXES


# Indexes one dialect keeps and the other does not need (see the migration that drops it).
POSTGRES_ONLY_INDEXES = {"runs_by_owner"}  # SQLite 27: owned runs are its RUNNING runs


# Column facts both dialects can state: a type family, NOT NULL, part of the primary key.
_FAMILY = {
    "text": "text",
    "real": "float",
    "double precision": "float",
    "integer": "int",
    "bigint": "int",
}
Schema = dict[str, Any]


def sqlite_schema(url: str) -> Schema:
    tables: dict[str, dict[str, tuple[str, bool, bool]]] = {}
    with contextlib.closing(sqlite3.connect(sqlite_path(url))) as conn:
        names = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        for (table,) in names:
            columns = conn.execute(f"PRAGMA table_info({table})").fetchall()
            tables[table] = {
                name: (_FAMILY[kind.lower()], bool(notnull or pk), pk > 0)
                for _, name, kind, notnull, _, pk in columns
            }
        indexes = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        ).fetchall()
    return {"tables": tables, "indexes": sorted(name for (name,) in indexes)}


def postgres_schema(url: str) -> Schema:
    columns = execute(
        url,
        "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable = 'NO', "
        "EXISTS (SELECT 1 FROM information_schema.table_constraints t "
        "JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name "
        "AND k.table_schema = t.table_schema AND k.table_name = t.table_name "
        "WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_schema = c.table_schema "
        "AND t.table_name = c.table_name AND k.column_name = c.column_name) "
        "FROM information_schema.columns c WHERE c.table_schema = 'public'",
    )
    tables: dict[str, dict[str, tuple[str, bool, bool]]] = {}
    for table, column, kind, notnull, pk in columns:
        tables.setdefault(table, {})[column] = (_FAMILY[kind], notnull, pk)
    indexes = execute(
        url,
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' "
        "AND indexname NOT LIKE '%%_pkey'",
    )
    return {"tables": dict(sorted(tables.items())), "indexes": sorted(n for (n,) in indexes)}


@pytest.mark.parametrize("scheme", ["postgres", "postgresql+psycopg"])
async def test_open__other_postgres_url_schemes_are_accepted(pg_url: str, scheme: str) -> None:
    store = open_store(scheme + pg_url[len("postgresql") :])

    await store.open()
    try:
        assert await store.read(run_ops.get_run("nope")) is None
    finally:
        await store.close()
