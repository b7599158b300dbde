"""Retention (Store.prune_runs): what it deletes, what it keeps, on both stores."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from cairn.store import Store
from cairn.store.programs import control, prune, schedules
from cairn.store.programs import runs as run_ops
from cairn.store.programs.prune import OTHER_TABLES, RUN_TABLES
from cairn.store.records import PruneQuery, Subscription

from .kit import T0, OpenStore, execute, is_sqlite, run_record

OLD = T0 - 100 * 86400  # finished long before the cut-off
CUTOFF = T0 - 30 * 86400


async def finished(
    store: Store, run_id: str, *, at: float = OLD, status: str = "COMPLETED", **fields: Any
) -> None:
    await store.write(
        run_ops.create_run(
            run_record(run_id, status=status, created_at=at - 10, finished_at=at, **fields)
        )
    )


def give_rows(url: str, run_id: str) -> None:
    """One row of `run_id` in every table that holds a run's rows."""
    execute(
        url,
        "INSERT INTO run_columns (run_id, name, value, created_at) VALUES (?, 'c', '1', 0)",
        (run_id,),
    )
    execute(
        url,
        "INSERT INTO steps (run_id, seq, key, kind, name, status, attempts) "
        "VALUES (?, 1, 'add#1', 'step', 'add', 'completed', 1)",
        (run_id,),
    )
    execute(
        url,
        "INSERT INTO step_attempts (run_id, execution, key, attempt, error_type, message, "
        "traceback, failed_at) VALUES (?, 1, 'add#1', 1, 'E', 'm', 'tb', 0)",
        (run_id,),
    )
    execute(
        url,
        "INSERT INTO messages (run_id, channel, payload, created_at, consumed_by) "
        "VALUES (?, 'event:x', '1', 0, 'x#2')",
        (run_id,),
    )
    execute(
        url,
        "INSERT INTO hooks (token, run_id, name, created_at) VALUES (?, ?, 'h', 0)",
        (f"tok-{run_id}", run_id),
    )
    execute(
        url,
        "INSERT INTO tasks (task_id, run_id, name, title, status, created_at) "
        "VALUES (?, ?, 't', 'T', 'submitted', 0)",
        (f"task-{run_id}", run_id),
    )
    execute(
        url,
        "INSERT INTO run_executions (run_id, execution, started_at, cause, from_seq) "
        "VALUES (?, 2, 0, 'retry', 1)",
        (run_id,),
    )
    execute(
        url,
        "INSERT INTO retried_steps (run_id, execution, seq, key, kind, name, status, attempts) "
        "VALUES (?, 1, 1, 'add#1', 'step', 'add', 'failed', 1)",
        (run_id,),
    )
    execute(
        url,
        "INSERT INTO step_tasks (task_id, run_id, key, attempt, step, queue, status, created_at) "
        "VALUES (?, ?, 'add#1', 1, 'add', 'gpu', 'done', 0)",
        (f"st-{run_id}", run_id),
    )
    execute(
        url,
        "INSERT INTO stream_chunks (run_id, name, seq, kind, step_key, attempt, claim, "
        "created_at) VALUES (?, 'tokens', 1, 'close', 'add#1', 1, 1, 0)",
        (run_id,),
    )


def rows_of(url: str, run_id: str) -> dict[str, int]:
    """How many rows `run_id` has in each table (runs included)."""
    return {
        table: int(execute(url, f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,))[0][0])
        for table in ("runs", *RUN_TABLES)
    }


async def prune_all(
    store: Store, query: PruneQuery, *, limit: int = 500, dry_run: bool = False
) -> int:
    total, after = 0, None
    while True:
        op = prune.prune_runs(query, after=after, limit=limit, dry_run=dry_run)
        batch = await (store.read(op) if dry_run else store.write(op))
        total += batch.count
        if batch.after is None:
            return total
        after = batch.after


def tables(url: str) -> set[str]:
    if is_sqlite(url):
        rows = execute(url, "SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        rows = execute(
            url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        )
    return {str(name) for (name,) in rows if not str(name).startswith("sqlite_")}


async def test_prune__every_table_of_the_schema_is_known(store: Store, store_url: str) -> None:
    # A table added by a migration must say whether it holds a run's rows (RUN_TABLES).
    assert tables(store_url) == set(RUN_TABLES) | set(OTHER_TABLES)
    for table in RUN_TABLES:
        execute(store_url, f"SELECT run_id FROM {table} WHERE 1 = 0")


async def test_prune__deletes_old_finished_runs_with_every_row_they_own(
    store: Store, store_url: str
) -> None:
    for status in ("COMPLETED", "FAILED", "CANCELLED", "CONTINUED"):
        await finished(store, f"old-{status}", status=status)
        give_rows(store_url, f"old-{status}")
    await finished(store, "young", at=T0)
    give_rows(store_url, "young")

    deleted = await prune_all(store, PruneQuery(CUTOFF))

    assert deleted == 4
    for status in ("COMPLETED", "FAILED", "CANCELLED", "CONTINUED"):
        assert set(rows_of(store_url, f"old-{status}").values()) == {0}
        assert await store.read(run_ops.get_run(f"old-{status}")) is None
    assert set(rows_of(store_url, "young").values()) == {1}


async def test_prune__never_deletes_an_unfinished_run(store: Store, store_url: str) -> None:
    for status in ("PENDING", "RUNNING", "SLEEPING", "WAITING", "PAUSED"):
        await store.write(
            run_ops.create_run(run_record(f"r-{status}", status=status, created_at=OLD))
        )
        # Even with a finished time left behind (a retried run's, say), it is not finished.
        execute(store_url, "UPDATE runs SET finished_at = ? WHERE run_id = ?", (OLD, f"r-{status}"))

    assert await prune_all(store, PruneQuery(CUTOFF)) == 0

    for status in ("PENDING", "RUNNING", "SLEEPING", "WAITING", "PAUSED"):
        assert await store.read(run_ops.get_run(f"r-{status}")) is not None


async def test_prune__keeps_a_finished_child_of_an_unfinished_parent(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("parent", status="WAITING", created_at=OLD)))
    await finished(store, "child", parent_id="parent")
    await finished(store, "other-child", parent_id="gone-parent")

    assert await prune_all(store, PruneQuery(CUTOFF)) == 1

    assert await store.read(run_ops.get_run("child")) is not None
    assert await store.read(run_ops.get_run("other-child")) is None


async def test_prune__keeps_a_finished_parent_of_an_unfinished_child(store: Store) -> None:
    await finished(store, "parent")
    await store.write(
        run_ops.create_run(
            run_record("detached-child", status="SLEEPING", parent_id="parent", detached=1)
        )
    )

    assert await prune_all(store, PruneQuery(CUTOFF)) == 0

    assert await store.read(run_ops.get_run("parent")) is not None


async def test_prune__keeps_a_chain_whose_newest_run_is_unfinished(store: Store) -> None:
    await finished(store, "a", status="CONTINUED", continued_to="b")
    await finished(store, "b", status="CONTINUED", continued_from="a", continued_to="c")
    await store.write(run_ops.create_run(run_record("c", status="SLEEPING", continued_from="b")))

    assert await prune_all(store, PruneQuery(CUTOFF)) == 0
    assert await prune_all(store, PruneQuery(CUTOFF), limit=1) == 0

    assert await store.read(run_ops.get_run("a")) is not None
    assert await store.read(run_ops.get_run("b")) is not None


async def test_prune__deletes_a_whole_chain_once_its_newest_run_is_finished(
    store: Store,
) -> None:
    await finished(store, "a", status="CONTINUED", continued_to="b")
    await finished(store, "b", status="CONTINUED", continued_from="a", continued_to="c")
    await finished(store, "c", at=T0, continued_from="b")  # newest: young, so kept

    assert await prune_all(store, PruneQuery(CUTOFF), limit=1) == 2

    assert await store.read(run_ops.get_run("a")) is None
    assert await store.read(run_ops.get_run("b")) is None
    assert await store.read(run_ops.get_run("c")) is not None


async def test_prune__a_long_chain_is_read_in_one_statement(store: Store) -> None:
    # 300 links; the unfinished head keeps every one of them.
    for i in range(300):
        await finished(
            store, f"l{i:03}", at=OLD + i, status="CONTINUED", continued_to=f"l{i + 1:03}"
        )
    await store.write(
        run_ops.create_run(run_record("l300", status="WAITING", continued_from="l299"))
    )

    assert await prune_all(store, PruneQuery(CUTOFF), limit=50) == 0

    await finished(store, "unrelated")
    assert await prune_all(store, PruneQuery(CUTOFF), limit=50) == 1


async def test_prune__filters_by_status_and_workflow(store: Store) -> None:
    await finished(store, "done")
    await finished(store, "failed", status="FAILED")
    await finished(store, "other", workflow="tests.other")

    assert await prune_all(store, PruneQuery(CUTOFF, statuses=("FAILED",))) == 1
    assert await prune_all(store, PruneQuery(CUTOFF, workflow="tests.other")) == 1

    assert await store.read(run_ops.get_run("done")) is not None
    assert await store.read(run_ops.get_run("failed")) is None
    assert await store.read(run_ops.get_run("other")) is None


async def test_prune__dry_run_counts_and_deletes_nothing(store: Store, store_url: str) -> None:
    for i in range(7):
        await finished(store, f"r{i}", at=OLD + i)
        give_rows(store_url, f"r{i}")

    assert await prune_all(store, PruneQuery(CUTOFF), limit=3, dry_run=True) == 7

    for i in range(7):
        assert set(rows_of(store_url, f"r{i}").values()) == {1}


async def test_prune__batches_go_on_past_runs_that_are_kept(store: Store) -> None:
    await store.write(run_ops.create_run(run_record("parent", status="RUNNING", created_at=OLD)))
    for i in range(5):  # the oldest: kept, and not read again by later batches
        await finished(store, f"kept{i}", at=OLD + i, parent_id="parent")
    for i in range(5):
        await finished(store, f"gone{i}", at=OLD + 10 + i)

    first = await store.write(prune.prune_runs(PruneQuery(CUTOFF), limit=3))
    assert (first.count, first.after) == (0, (OLD + 2, "kept2"))

    assert await prune_all(store, PruneQuery(CUTOFF), limit=3) == 5
    for i in range(5):
        assert await store.read(run_ops.get_run(f"kept{i}")) is not None


async def test_prune__concurrent_prunes_delete_each_run_once(open_store_at: OpenStore) -> None:
    stores = [await open_store_at() for _ in range(3)]
    for i in range(60):
        await finished(stores[0], f"r{i:02}", at=OLD + i % 7)

    counts = await asyncio.gather(*(prune_all(s, PruneQuery(CUTOFF), limit=8) for s in stores))

    assert sum(counts) == 60
    assert (await stores[0].write(prune.prune_runs(PruneQuery(CUTOFF)))).count == 0


async def test_prune__a_retried_run_is_not_deleted(store: Store) -> None:
    await finished(store, "failed", status="FAILED")
    assert await store.write(control.retry_run("failed", now=T0))

    assert await prune_all(store, PruneQuery(CUTOFF)) == 0

    run = await store.read(run_ops.get_run("failed"))
    assert run is not None and run.status == "PENDING"


SUBSCRIBERS = (Subscription("order.created", "tests.a"), Subscription("order.created", "tests.b"))


async def emit(store: Store, key: str, *, at: float = OLD - 10) -> list[str]:
    return await store.write(
        schedules.emit_event("order.created", "{}", key=key, now=at, local=SUBSCRIBERS)
    )


def finish(url: str, run_id: str, at: float) -> None:
    execute(
        url,
        "UPDATE runs SET status = 'COMPLETED', finished_at = ? WHERE run_id = ?",
        (at, run_id),
    )


def emit_keys(url: str) -> set[tuple[str, str]]:
    rows = execute(url, "SELECT event_type, key FROM emit_keys")
    return {(str(kind), str(key)) for kind, key in rows}


async def test_prune__an_emit_key_goes_with_the_last_run_it_started(
    store: Store, store_url: str
) -> None:
    key = "o-1:a/b%c"  # quoted in the run ids
    first, second = await emit(store, key)
    young = await emit(store, "o-2")
    finish(store_url, first, OLD)
    finish(store_url, second, T0)  # inside retention
    for run_id in young:
        finish(store_url, run_id, T0)

    assert await prune_all(store, PruneQuery(CUTOFF)) == 1
    # One of its runs is kept: the key is remembered, emitting it again starts nothing.
    assert emit_keys(store_url) == {("order.created", key), ("order.created", "o-2")}
    assert await emit(store, key, at=T0) == [first, second]
    assert await store.read(run_ops.get_run(first)) is None

    finish(store_url, second, OLD)
    assert await prune_all(store, PruneQuery(CUTOFF)) == 1
    assert emit_keys(store_url) == {("order.created", "o-2")}

    # Forgotten with its runs: emitting it again starts them anew, under the same ids.
    assert await emit(store, key, at=T0) == [first, second]
    for run_id in (first, second):
        run = await store.read(run_ops.get_run(run_id))
        assert run is not None and run.status == "PENDING"


async def test_prune__concurrent_prunes_forget_every_emit_key(
    open_store_at: OpenStore, store_url: str
) -> None:
    stores = [await open_store_at() for _ in range(3)]
    for i in range(20):
        for run_id in await emit(stores[0], f"k{i:02}"):
            # A key's two runs far apart in the order prunes go: different batches.
            finish(store_url, run_id, OLD + (i if run_id.endswith("tests.a") else 50 + i))

    counts = await asyncio.gather(*(prune_all(s, PruneQuery(CUTOFF), limit=4) for s in stores))

    assert sum(counts) == 40
    assert emit_keys(store_url) == set()


def test_prune__a_limit_below_one_is_refused_before_anything_runs() -> None:
    # Checked when the operation is made, so neither store is asked (the old Store method
    # raised it the same way, before its transaction).
    for limit in (0, -5):
        with pytest.raises(ValueError, match=f"limit must be positive, got {limit}"):
            prune.prune_runs(PruneQuery(CUTOFF), limit=limit)
