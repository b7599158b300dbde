"""SQLite only: a failing write of a shared commit undone alone; the plans of hot reads."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cairn.errors import StoreError
from cairn.models import RunStatus
from cairn.store import _sql, sqlite_path
from cairn.store.programs import base
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs.base import Program, Sql
from cairn.store.records import RunQuery
from cairn.store.sqlite.connections import connect, without_nones
from cairn.store.sqlite.store import SqliteStore

from .kit import held, run_record, step_record


class Boom(Exception):
    pass


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(sqlite_path(sqlite_url))
    await store.open()
    yield store
    await store.close()


def insert_then_fail(run_id: str) -> Program[None]:
    yield Sql(_sql.INSERT_RUN, _sql.run_params(run_record(run_id)))
    raise Boom(run_id)


@base.operation
@base.single_write
def broken_promise(run_id: str) -> Program[None]:
    # Declared single-write, yet it raises after changing a row.
    yield from insert_then_fail(run_id)


async def test_write__a_failing_program_is_undone_without_its_neighbours(
    sqlite_store: SqliteStore,
) -> None:
    outcomes = await asyncio.gather(
        sqlite_store.write(run_ops.create_run(run_record("before"))),
        sqlite_store.write(lambda: insert_then_fail("bad")),
        sqlite_store.write(run_ops.create_run(run_record("after"))),
        return_exceptions=True,
    )

    assert isinstance(outcomes[1], Boom)
    assert await sqlite_store.read(run_ops.get_run("bad")) is None
    assert await sqlite_store.read(run_ops.get_run("before")) is not None
    assert await sqlite_store.read(run_ops.get_run("after")) is not None


async def test_write__a_program_alone_in_its_commit_leaves_nothing_when_it_fails(
    sqlite_store: SqliteStore,
) -> None:
    with pytest.raises(Boom):
        await sqlite_store.write(lambda: insert_then_fail("bad"))

    assert await sqlite_store.read(run_ops.get_run("bad")) is None


async def test_write__a_lone_write_waits_on_the_loop_while_another_connection_holds_the_lock(
    sqlite_store: SqliteStore,
) -> None:
    # A write nothing can join commits at once on its own (SqliteStore._alone); when the
    # lock is taken it must queue and wait on the loop, not fail and not block the loop.
    holder = sqlite3.connect(sqlite_store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        write = asyncio.ensure_future(sqlite_store.write(run_ops.create_run(run_record("r-1"))))
        await asyncio.sleep(0.05)  # the loop runs meanwhile
        assert not write.done()
        holder.execute("COMMIT")
    finally:
        holder.close()
    stored, new = await asyncio.wait_for(write, 5)

    assert new and stored.run_id == "r-1"
    assert await sqlite_store.read(run_ops.get_run("r-1")) is not None
    # The next lone write commits at once again.
    await sqlite_store.write(run_ops.create_run(run_record("r-2")))
    assert await sqlite_store.read(run_ops.get_run("r-2")) is not None


async def test_write__after_every_waiting_writer_gave_up_the_next_write_still_commits(
    sqlite_store: SqliteStore,
) -> None:
    # Writes waiting for a held lock whose callers all gave up (a dashboard request past
    # its deadline, a stop's bounded hand-back) are dropped; the store must then stop
    # waiting for the lock too, or a later write queues behind a flush nobody schedules.
    holder = sqlite3.connect(sqlite_store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(sqlite_store.write(run_ops.create_run(run_record("r-1"))), 0.1)
        await asyncio.sleep(0.2)  # the retries meanwhile find nobody left waiting
    finally:
        holder.execute("COMMIT")
        holder.close()
    await asyncio.wait_for(sqlite_store.write(run_ops.create_run(run_record("r-2"))), 5)
    assert await sqlite_store.read(run_ops.get_run("r-1")) is None  # withdrawn, not made
    assert await sqlite_store.read(run_ops.get_run("r-2")) is not None


async def test_write__a_lone_statement_commits_by_itself_or_waits_for_a_held_lock(
    sqlite_store: SqliteStore,
) -> None:
    # A step's entry alone is one statement: it commits without BEGIN and COMMIT around
    # it, so another connection sees it at once; when another connection holds the write
    # lock, it queues (afresh) and waits on the loop like any lone write.
    await sqlite_store.write(run_ops.create_run(run_record("r-1", status="RUNNING", owner="w")))
    await sqlite_store.write(journal_ops.record_step(held("w"), step_record("r-1", 1)))
    reader = sqlite3.connect(sqlite_store.path, isolation_level=None)
    try:
        assert reader.execute("SELECT seq FROM steps").fetchall() == [(1,)]
        assert not sqlite_store.conn.in_transaction
        reader.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(
            sqlite_store.write(journal_ops.record_step(held("w"), step_record("r-1", 2)))
        )
        await asyncio.sleep(0.05)  # the loop runs meanwhile
        assert not write.done()
        reader.execute("COMMIT")
        await asyncio.wait_for(write, 5)
        assert reader.execute("SELECT seq FROM steps ORDER BY seq").fetchall() == [(1,), (2,)]
    finally:
        reader.close()
    with pytest.raises(StoreError, match="UNIQUE"):  # refused, and nothing left open
        await sqlite_store.write(journal_ops.record_step(held("w"), step_record("r-1", 2)))
    assert not sqlite_store.conn.in_transaction


async def test_write__a_new_run_without_a_dedup_key_commits_as_its_insert_alone(
    sqlite_store: SqliteStore,
) -> None:
    # create_run declares itself `lone` for such a run; with a dedup key it is checked
    # first, in a transaction.
    seen: list[str] = []
    sqlite_store.conn.set_trace_callback(seen.append)
    await sqlite_store.write(run_ops.create_run(run_record("r-1")))
    await sqlite_store.write(run_ops.create_run(run_record("r-2", dedup_key="k")))
    sqlite_store.conn.set_trace_callback(None)

    first_words = [statement.split()[0] for statement in seen]
    assert first_words == ["INSERT", "BEGIN", "SELECT", "SELECT", "INSERT", "COMMIT"]


def test_write__what_a_run_s_operations_declare_for_their_arguments() -> None:
    assert run_ops.create_run(run_record("r")).lone()
    assert not run_ops.create_run(run_record("r", dedup_key="k")).lone()
    assert run_ops.create_run(run_record("r", dedup_key="k")).single_write()
    end = {"result": None, "error": None, "now": 0.0}
    alone = run_ops.finish_run("r", held("w"), "COMPLETED", alone=True, **end)
    told = run_ops.finish_run("r", held("w"), "COMPLETED", **end)
    assert alone.lone() and alone.single_write()
    assert not told.lone() and not told.single_write()


def test_without_nones__only_plain_placeholders_are_rewritten() -> None:
    # sqlite3 binds None slowly: a statement with many parameters says NULL instead.
    assert without_nones("SELECT ?, ?, ?", (1, None, "x")) == ("SELECT ?, NULL, ?", [1, "x"])
    assert without_nones("SELECT ?, '?', ?", (None, "x")) == ("SELECT ?, '?', ?", (None, "x"))
    assert without_nones("SELECT ?1, ?2", (None, "x")) == ("SELECT ?1, ?2", (None, "x"))


async def test_write__a_single_write_program_failing_after_a_change_sinks_its_commit(
    sqlite_store: SqliteStore,
) -> None:
    outcomes = await asyncio.gather(
        sqlite_store.write(run_ops.create_run(run_record("before"))),
        sqlite_store.write(broken_promise("bad")),
        sqlite_store.write(run_ops.create_run(run_record("after"))),
        return_exceptions=True,
    )

    # Nothing of it may stay behind, so the whole commit is rolled back and reported.
    assert isinstance(outcomes[1], Boom)
    assert isinstance(outcomes[0], StoreError)
    assert isinstance(outcomes[2], StoreError)
    for run_id in ("before", "bad", "after"):
        assert await sqlite_store.read(run_ops.get_run(run_id)) is None


@pytest.mark.parametrize(
    ("name", "text", "params"),
    [
        ("due sleepers", _sql.SELECT_WOKEN, (0.0, 10)),
        ("next timer", _sql.NEXT_WAKE, ()),
    ],
)
async def test_parked_runs__are_found_by_index_not_by_reading_every_sleeper(
    sqlite_store: SqliteStore, name: str, text: str, params: tuple[object, ...]
) -> None:
    # Every claim and every idle wait asks these; with runs_by_status (status, priority,
    # created_at) they read all sleeping runs: 100,000 sleepers made each claim a scan.
    plan = sqlite_store.conn.execute(f"EXPLAIN QUERY PLAN {text}", params).fetchall()
    searches = [row[3] for row in plan if "runs" in row[3]]

    assert searches, plan
    assert all("runs_parked" in step for step in searches), (name, searches)


@pytest.mark.parametrize(
    ("query", "index"),
    [
        (RunQuery(status="COMPLETED", limit=51), "runs_by_status_created"),
        (RunQuery(columns={"customer": '"c-1"'}, limit=51), "run_columns_by_value"),
        (
            RunQuery(status="FAILED", columns={"customer": '"c-1"'}, limit=51),
            "run_columns_by_value",
        ),
    ],
)
async def test_list_runs__filtered_pages_are_read_in_order_not_sorted(
    sqlite_store: SqliteStore, query: RunQuery, index: str
) -> None:
    # The dashboard's runs list: with 100,000 runs, sorting every COMPLETED run took
    # 400 ms, and a rare column value was found by reading runs one by one (100 ms).
    text, params = _sql.list_runs(query)
    plan = [row[3] for row in sqlite_store.conn.execute(f"EXPLAIN QUERY PLAN {text}", params)]

    assert index in plan[0], plan
    assert not any("TEMP B-TREE" in step for step in plan), plan


def test_open__processes_opening_a_new_database_at_once_all_succeed(tmp_path: Path) -> None:
    # SQLite refuses the switch to WAL ("database is locked") without waiting while
    # another connection holds the new file; every opener must wait, not fail.
    failures = []
    for trial in range(25):  # the race is lost in roughly one trial in six
        path = str(tmp_path / f"new-{trial}.db")
        start = threading.Barrier(6)

        def opener(path: str = path, start: threading.Barrier = start) -> None:
            async def open_and_close() -> None:
                store = SqliteStore(path)
                await store.open()
                await store.close()

            start.wait()
            try:
                asyncio.run(open_and_close())
            except StoreError as exc:
                failures.append(str(exc))

        threads = [threading.Thread(target=opener) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert failures == []


async def test_open__a_new_database_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "private.db"
    store = SqliteStore(str(path))
    await store.open()
    try:
        await store.write(run_ops.create_run(run_record("private-1")))
        modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    finally:
        await store.close()
    assert modes["private.db"] == 0o600
    assert all(mode == 0o600 for mode in modes.values()), modes  # -wal and -shm too


async def test_open__an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    path.touch(mode=0o640)
    path.chmod(0o640)
    store = SqliteStore(str(path))
    await store.open()
    await store.close()
    assert path.stat().st_mode & 0o777 == 0o640


async def test_read_only__a_refused_write_names_the_file_and_the_store_says_it_cannot_write(
    sqlite_store: SqliteStore,
) -> None:
    await sqlite_store.write(run_ops.create_run(run_record("r1")))
    assert sqlite_store.health.unwritable is None
    sqlite_store.conn.execute("PRAGMA query_only = ON")  # SQLite's own SQLITE_READONLY

    with pytest.raises(StoreError, match="is read-only for this process") as refused:
        await sqlite_store.write(run_ops.create_run(run_record("r2")))

    reason = sqlite_store.health.unwritable
    assert reason is not None and repr(sqlite_store.path) in reason
    assert str(refused.value).startswith(f"database {sqlite_store.path!r} is read-only")
    assert [r.run_id for r in await sqlite_store.read(run_ops.list_runs(RunQuery()))] == [
        "r1"
    ]  # reads go on
    sqlite_store.conn.execute("PRAGMA query_only = OFF")  # so that the fixture can close it


async def test_count_runs__with_a_limit_and_no_filter_each_status_reads_its_index_range(
    sqlite_store: SqliteStore,
) -> None:
    # The runs page's counts: GROUP BY status over the whole table read every run (the
    # page took 2.4x as long over 100,000 runs as over 4,000). Each status's count must
    # be a search of a status index, stopped by its LIMIT, never a scan of runs.
    text, params = _sql.count_runs(RunQuery(), limit=1001)
    plan = [row[3] for row in sqlite_store.conn.execute(f"EXPLAIN QUERY PLAN {text}", params)]
    reads = [step for step in plan if "runs" in step]

    assert len(reads) == len(RunStatus), plan
    assert all(step.startswith("SEARCH runs USING COVERING INDEX") for step in reads), plan


async def test_claims__search_an_index_of_pending_runs_only(sqlite_store: SqliteStore) -> None:
    # A run started and executed by one engine is inserted RUNNING and finished COMPLETED:
    # an index of every run's status and priority cost its insert and its finish each one
    # more B-tree update (about a fifth of the statement), for claims that read PENDING
    # runs alone.
    plan = sqlite_store.conn.execute(
        f"EXPLAIN QUERY PLAN {_sql.SELECT_PENDING}", (0.0, 10)
    ).fetchall()
    searches = [row[3] for row in plan if "runs" in row[3]]
    indexes = {row[1]: row[4] for row in sqlite_store.conn.execute("PRAGMA index_list(runs)")}

    assert searches and all("runs_pending" in step for step in searches), searches
    assert not any("TEMP B-TREE" in row[3] for row in plan), plan
    assert indexes["runs_pending"] == 1  # partial: WHERE status = 'PENDING'
    assert "runs_by_status" not in indexes


@pytest.mark.parametrize(
    "text", [_sql.SELECT_OWNED, _sql.SELECT_OWNED_IN_ORDER, _sql.RELEASE_OWNED]
)
async def test_owned_runs__are_found_among_running_runs_without_an_owner_index(
    sqlite_store: SqliteStore, text: str
) -> None:
    # A run started and executed by one engine is inserted RUNNING and owned, then
    # finished without an owner: an index of owners cost its insert and its finish each
    # one more B-tree update (about a tenth of the two statements). A worker's own runs
    # (its heartbeat's read-back, their release) are all RUNNING: they are a search of
    # the status index's RUNNING range, never a scan of runs.
    params = (None,) * text.count("?")
    plan = [row[3] for row in sqlite_store.conn.execute(f"EXPLAIN QUERY PLAN {text}", params)]
    indexes = {row[1] for row in sqlite_store.conn.execute("PRAGMA index_list(runs)")}

    assert plan[0].startswith("SEARCH runs USING INDEX runs_by_status_created (status=?)"), plan
    assert "runs_by_owner" not in indexes


def test_connect__binds_none_as_null_and_keeps_a_none_adapter_registered_before(
    tmp_path: Path,
) -> None:
    key = (type(None), sqlite3.PrepareProtocol)
    before = sqlite3.adapters.pop(key, None)
    try:
        conn = connect(str(tmp_path / "a.db"), busy_ms=0)
        conn.execute("CREATE TABLE t (a)")
        conn.execute("INSERT INTO t VALUES (?)", (None,))
        assert conn.execute("SELECT typeof(a) FROM t").fetchall() == [("null",)]
        conn.close()

        def mine(value: None) -> str:
            return "mine"

        sqlite3.register_adapter(type(None), mine)
        conn = connect(str(tmp_path / "b.db"), busy_ms=0)
        assert sqlite3.adapters[key] is mine  # not replaced by cairn's
        conn.close()
    finally:
        sqlite3.adapters.pop(key, None)
        if before is not None:
            sqlite3.adapters[key] = before
