"""Store.begin_step_transaction: the user's rows and the journal entry commit as one."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

import pytest

from cairn.store import Store
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs
from cairn.store.protocol import LeaseLost, StepTransaction

from .kit import OpenStore, execute, held, run_record, sqlite_connect, step_record

LEDGER = "CREATE TABLE ledger (item TEXT)"


def _dialect(store: Store) -> str:
    return "?" if store.dialect == "sqlite" else "%s"


async def _insert(store: Store, txn: StepTransaction, item: str, *, sync: bool) -> None:
    text = f"INSERT INTO ledger (item) VALUES ({_dialect(store)})"
    if sync:
        await asyncio.to_thread(txn.connection.execute, text, (item,))
    else:
        result = txn.connection.execute(text, (item,))
        if asyncio.iscoroutine(result):  # psycopg's AsyncConnection
            await result


def _url(store: Any) -> str:
    if store.dialect != "sqlite":
        return str(store.url)
    # A memory:// store's path is the URI of the process's in-memory database.
    return "memory://" if store.path.startswith("file:") else f"sqlite:///{store.path}"


def _nothing_seen_outside(store: Any) -> bool:
    """Whether a connection of its own reads no ledger row while the step's is open."""
    url = _url(store)
    if not url.startswith("memory:"):
        return execute(url, "SELECT item FROM ledger") == []
    # memory:// (SQLite's memdb) keeps readers out of an open write transaction instead.
    with contextlib.closing(sqlite_connect(url, timeout=0)) as conn:
        try:
            conn.execute("SELECT item FROM ledger").fetchall()
        except sqlite3.OperationalError as exc:
            return "locked" in str(exc)
    return False


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_step_transaction__rows_and_entry_commit_together(store: Store, sync: bool) -> None:
    execute(_url(store), LEDGER)
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    txn = await store.begin_step_transaction(sync=sync)
    await _insert(store, txn, "a", sync=sync)
    assert txn.state() == "open"
    assert _nothing_seen_outside(store)  # not before the commit
    await txn.commit(held("w1"), step_record("r1", 1))

    assert execute(_url(store), "SELECT item FROM ledger") == [("a",)]
    assert await store.read(journal_ops.load_journal("r1")) == [step_record("r1", 1)]


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_step_transaction__lost_lease_rolls_back_the_rows(store: Store, sync: bool) -> None:
    execute(_url(store), LEDGER)
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    txn = await store.begin_step_transaction(sync=sync)
    await _insert(store, txn, "a", sync=sync)
    with pytest.raises(LeaseLost):
        await txn.commit(held("w2"), step_record("r1", 1))  # another owner's lease

    assert execute(_url(store), "SELECT item FROM ledger") == []
    assert await store.read(journal_ops.load_journal("r1")) == []
    # The write path is free again: an ordinary write commits.
    await store.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))


async def test_step_transaction__rollback_undoes_and_frees_the_write_path(store: Store) -> None:
    execute(_url(store), LEDGER)
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))

    txn = await store.begin_step_transaction(sync=False)
    await _insert(store, txn, "a", sync=False)
    # A write queued meanwhile (SQLite holds its group commit) commits after the rollback.
    queued = asyncio.ensure_future(
        store.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))
    )
    await txn.rollback()
    await txn.rollback()  # idempotent
    await asyncio.wait_for(queued, 10)

    assert execute(_url(store), "SELECT item FROM ledger") == []
    assert await store.read(journal_ops.load_journal("r1")) == [step_record("r1", 1)]


async def test_step_transaction__a_second_store_on_the_database_commits_after(
    store: Store, open_store_at: OpenStore
) -> None:
    execute(_url(store), LEDGER)
    other = await open_store_at()  # another process, in effect
    await store.write(runs.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await store.write(runs.create_run(run_record("r2", status="RUNNING", owner="w2")))

    first = await store.begin_step_transaction(sync=False)
    await _insert(store, first, "first", sync=False)
    begun = asyncio.ensure_future(other.begin_step_transaction(sync=False))
    await asyncio.sleep(0.05)
    await first.commit(held("w1"), step_record("r1", 1))
    second = await asyncio.wait_for(begun, 10)
    await _insert(other, second, "second", sync=False)
    await second.commit(held("w2"), step_record("r2", 1))

    assert sorted(execute(_url(store), "SELECT item FROM ledger")) == [("first",), ("second",)]
