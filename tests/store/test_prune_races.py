"""Retention racing other writers: a transaction held open on a second connection.

Each test opens a real transaction on its own connection (a retry, or another prune),
holds it, runs a prune on the store meanwhile, then commits. On PostgreSQL the prune
either waits for the held transaction (seen in pg_stat_activity) or finishes before it
commits; on SQLite its write transaction cannot begin until the held one ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from cairn.store import Store
from cairn.store.postgres import dialect
from cairn.store.programs import control, prune, schedules
from cairn.store.programs import control as control_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs.base import FINAL, Program
from cairn.store.records import Pruned, PruneQuery, Subscription

from .kit import T0, execute, is_sqlite, run_record, sqlite_connect
from .test_prune import CUTOFF, OLD, emit_keys, finished

SUBSCRIBERS = (Subscription("paid", "tests.a"), Subscription("paid", "tests.b"))


class Held:
    """A transaction on its own connection, left open until `commit`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: Any
        if is_sqlite(url):
            self.conn = sqlite_connect(url, isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            import psycopg

            self.conn = psycopg.connect(url)  # not autocommit: BEGIN on first statement

    def run(self, program: Program[Any]) -> Any:
        """Run `program`'s statements in the held transaction; what it returns."""
        answer: Any = None
        try:
            while True:
                statement = program.send(answer)
                if is_sqlite(self.url):
                    cursor = self.conn.execute(statement.text, statement.params)
                else:
                    for text, params in dialect.program_statements(
                        statement.text, statement.params, lock=statement.lock
                    ):
                        cursor = self.conn.execute(text, params)
                if statement.fetch == "count":
                    answer = cursor.rowcount
                elif statement.fetch == "one":
                    answer = cursor.fetchone() if cursor.description else None
                else:
                    answer = cursor.fetchall() if cursor.description else []
        except StopIteration as done:
            return done.value

    def commit(self) -> None:
        if is_sqlite(self.url):
            self.conn.execute("COMMIT")
        else:
            self.conn.commit()
        self.conn.close()


@contextlib.contextmanager
def held(url: str) -> Iterator[Held]:
    transaction = Held(url)
    try:
        yield transaction
    finally:
        with contextlib.suppress(Exception):
            transaction.conn.close()


async def prune_while(
    store: Store, url: str, transaction: Held, query: PruneQuery | None = None
) -> Pruned:
    """Prune while `transaction` is open; commit it once the prune waits for it (or is done)."""
    task = asyncio.create_task(store.write(prune.prune_runs(query or PruneQuery(CUTOFF))))
    await waited_for(url, task)
    transaction.commit()
    return await task


async def waited_for(url: str, task: asyncio.Task[Any]) -> None:
    """Return once `task` is done or waits for a lock held by another transaction."""
    if is_sqlite(url):
        # Its BEGIN IMMEDIATE waits for the held one whenever the task gets to run.
        await asyncio.wait({task}, timeout=0.2)
        return
    while not task.done() and not waiting_for_a_lock(url):
        await asyncio.sleep(0.01)


def waiting_for_a_lock(url: str) -> bool:
    name = url.rsplit("/", 1)[1]
    rows = execute(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = ? AND wait_event_type = 'Lock'",
        (name,),
    )
    return int(rows[0][0]) > 0


async def status(store: Store, run_id: str) -> str | None:
    run = await store.read(run_ops.get_run(run_id))
    return None if run is None else run.status


async def test_prune__only_failed_runs_can_be_taken_back(store: Store) -> None:
    # Why retention locks only FAILED runs: the other finished statuses are final.
    for status in sorted(FINAL):
        await finished(store, status, status=status)
        assert not await store.write(control_ops.retry_run(status, now=T0))
    await finished(store, "failed", status="FAILED")
    assert await store.write(control_ops.retry_run("failed", now=T0))


async def test_prune__a_child_survives_its_parent_retried_meanwhile(
    store: Store, store_url: str
) -> None:
    await finished(store, "parent", at=T0, status="FAILED")  # young: only its child is old
    await finished(store, "child", parent_id="parent")

    with held(store_url) as retry:
        assert retry.run(control.retry_run("parent", now=T0)())
        pruned = await prune_while(store, store_url, retry)

    assert pruned.count == 0
    assert await status(store, "parent") == "PENDING"
    assert await status(store, "child") == "COMPLETED"


async def test_prune__a_parent_survives_its_child_retried_meanwhile(
    store: Store, store_url: str
) -> None:
    await finished(store, "parent")
    await finished(store, "child", at=T0, status="FAILED", parent_id="parent", detached=1)

    with held(store_url) as retry:
        assert retry.run(control.retry_run("child", now=T0)())
        pruned = await prune_while(store, store_url, retry)

    assert pruned.count == 0
    assert await status(store, "parent") == "COMPLETED"


async def test_prune__a_chain_survives_its_newest_run_retried_meanwhile(
    store: Store, store_url: str
) -> None:
    await finished(store, "a", status="CONTINUED", continued_to="b")
    await finished(store, "b", at=T0, status="FAILED", continued_from="a")

    with held(store_url) as retry:
        assert retry.run(control.retry_run("b", now=T0)())
        pruned = await prune_while(store, store_url, retry)

    assert pruned.count == 0
    assert await status(store, "a") == "CONTINUED"


async def test_prune__a_retry_after_the_prune_waits_for_it(store: Store, store_url: str) -> None:
    # The other order: the prune holds the parent first, so the retry comes after it.
    await store.write(
        run_ops.create_run(run_record("parent", status="FAILED", created_at=OLD, finished_at=T0))
    )
    await finished(store, "child", parent_id="parent")

    with held(store_url) as pruning:
        assert pruning.run(prune.prune_batch(PruneQuery(CUTOFF), None, 500, False)()).count == 1
        retried = asyncio.create_task(store.write(control_ops.retry_run("parent", now=T0)))
        await waited_for(store_url, retried)
        assert not retried.done()
        pruning.commit()
    assert await retried

    assert await status(store, "child") is None
    assert await status(store, "parent") == "PENDING"


async def test_prune__two_prunes_deleting_a_keys_last_runs_forget_it(
    store: Store, store_url: str
) -> None:
    first, second = await store.write(
        schedules.emit_event("paid", "{}", key="k", now=OLD, local=SUBSCRIBERS)
    )
    for at, run_id in enumerate((first, second)):
        execute(
            store_url,
            "UPDATE runs SET status = 'COMPLETED', finished_at = ? WHERE run_id = ?",
            (OLD + at, run_id),
        )

    with held(store_url) as other:
        # Another prune deletes the key's first run (and keeps the key: the second is left)
        # while this one deletes the second.
        assert other.run(prune.prune_batch(PruneQuery(CUTOFF), None, 1, False)()).count == 1
        pruned = await prune_while(store, store_url, other, PruneQuery(CUTOFF, workflow="tests.b"))

    assert pruned.count == 1
    assert emit_keys(store_url) == set()
