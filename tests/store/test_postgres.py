"""PostgreSQL only: lost connections (a restart) are retried, then reported; bulk writes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from cairn.errors import StoreError, StoreUnavailable
from cairn.store import _sql
from cairn.store.postgres.store import PostgresStore
from cairn.store.programs import journal as journal_ops
from cairn.store.programs import runs as run_ops
from cairn.store.programs import waits, workers
from cairn.store.programs.base import Program, Sql
from cairn.store.protocol import LeaseLost

from .kit import T0, execute, held, run_record, step_record, worker_record

# Ends every session on one database but the caller's, as a server restart does.
TERMINATE = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
    "WHERE datname = ? AND pid <> pg_backend_pid()"
)


def admin(pg_url: str) -> tuple[str, str]:
    """The maintenance database's URL and the test database's name."""
    base, database = pg_url.rsplit("/", 1)
    return f"{base}/postgres", database


async def kill_sessions(pg_url: str, *, times: int, every: float) -> int:
    """End every session on the test database `times` times, `every` seconds apart."""
    server, database = admin(pg_url)
    killed = 0
    for _ in range(times):
        await asyncio.sleep(every)
        killed += (await asyncio.to_thread(execute, server, TERMINATE, (database,)))[0][0]
    return killed


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_url, retry_for=10.0)
    await store.open()
    yield store
    await store.close()


async def test_writes_and_reads__survive_every_connection_being_killed(
    pg_store: PostgresStore, pg_url: str
) -> None:
    await pg_store.write(workers.register_worker(worker_record("w1")))
    for i in range(20):
        await pg_store.write(run_ops.create_run(run_record(f"r{i}", status="RUNNING", owner="w1")))

    async def steps(i: int) -> None:
        for seq in range(1, 21):
            step = step_record(f"r{i}", seq)
            while True:
                try:
                    await pg_store.write(journal_ops.record_step(held("w1"), step))
                    break
                except StoreUnavailable as exc:
                    # Its connection died after sending: whether it committed is known
                    # only from the journal (what the engine does too, core/durable.py).
                    assert exc.unknown
                    if any(
                        s.seq == seq for s in await pg_store.read(journal_ops.load_journal(f"r{i}"))
                    ):
                        break
            await pg_store.read(run_ops.get_run(f"r{i}"))

    killed, *_ = await asyncio.gather(
        kill_sessions(pg_url, times=3, every=0.05), *(steps(i) for i in range(20))
    )
    await pg_store.write(workers.beat(worker_record("w1")))

    assert killed > 0
    for i in range(20):
        assert [s.seq for s in await pg_store.read(journal_ops.load_journal(f"r{i}"))] == list(
            range(1, 21)
        )


async def test_writes__fail_with_store_error_once_the_server_stays_away(pg_url: str) -> None:
    server, database = admin(pg_url)
    store = PostgresStore(pg_url, retry_for=0.5)
    await store.open()
    try:
        execute(server, f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        execute(server, TERMINATE, (database,))

        with pytest.raises(StoreError, match=database):
            await store.write(run_ops.create_run(run_record("r1")))
    finally:
        execute(server, f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        await store.close()


async def test_open__hot_statements_get_bulk_forms(pg_store: PostgresStore) -> None:
    # Without them every step of every run costs a statement of its own.
    assert set(pg_store._bulk) == {_sql.INSERT_RUN, _sql.INSERT_STEP_OWNED, _sql.FINISH_RUN}


async def test_lone_writes__survive_their_connection_being_killed(
    pg_store: PostgresStore, pg_url: str
) -> None:
    # One run alone writes straight through libpq (`fast_path`): a killed connection
    # must be noticed and the write retried on a new one, as for batches.
    server, database = admin(pg_url)
    await pg_store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    for seq in range(1, 31):
        if seq % 10 == 0:
            execute(server, TERMINATE, (database,))
        await pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", seq)))

    assert [s.seq for s in await pg_store.read(journal_ops.load_journal("r1"))] == list(
        range(1, 31)
    )


async def test_a_failing_lone_write__fails_alone_and_the_next_one_works(
    pg_store: PostgresStore,
) -> None:
    await pg_store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))

    with pytest.raises(StoreError, match="duplicate key"):
        await pg_store.write(
            journal_ops.record_step(held("w1"), step_record("r1", 1))
        )  # the same key again
    with pytest.raises(LeaseLost):
        await pg_store.write(
            journal_ops.record_step(held("w2"), step_record("r1", 2))
        )  # not the owner
    await pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", 2)))

    assert [s.seq for s in await pg_store.read(journal_ops.load_journal("r1"))] == [1, 2]


async def test_a_lone_write_cancelled_in_flight__does_not_jam_the_writer(
    pg_store: PostgresStore,
) -> None:
    await pg_store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    for seq in range(1, 9):
        write = asyncio.create_task(
            pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", seq)))
        )
        for _ in range(seq % 4):  # cancel at different points of its round trips
            await asyncio.sleep(0)
        if seq > 4:
            await asyncio.sleep(0.0005 * seq)  # about when the reply comes in
        write.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await write

    # Whether or not the cancelled writes landed, later writes commit and nothing hangs.
    await asyncio.wait_for(
        pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", 10))), 5
    )
    await asyncio.wait_for(pg_store.write(run_ops.create_run(run_record("r2"))), 5)
    assert 10 in [s.seq for s in await pg_store.read(journal_ops.load_journal("r1"))]


async def test_transactions_alone__are_run_again_when_their_connection_dies_mid_way(
    pg_store: PostgresStore, pg_url: str
) -> None:
    # send_message is a transaction of several statements (lock, insert, wake). One whose
    # connection dies before COMMIT was rolled back by the server, so it is run afresh on
    # a new connection: every message lands exactly once, and no caller sees an error.
    for i in range(10):
        await pg_store.write(run_ops.create_run(run_record(f"r{i}", status="WAITING")))

    async def sends(i: int) -> None:
        for n in range(15):
            await pg_store.write(
                waits.send_message(f"r{i}", "go", str(n), idempotency_key=None, now=T0 + n)
            )

    killed, *_ = await asyncio.gather(
        kill_sessions(pg_url, times=4, every=0.03), *(sends(i) for i in range(10))
    )

    assert killed > 0
    rows = execute(
        pg_url, "SELECT run_id, count(*), count(DISTINCT payload) FROM messages GROUP BY run_id"
    )
    assert sorted(rows) == sorted((f"r{i}", 15, 15) for i in range(10))


async def test_a_lone_write__uses_the_connection_its_lane_has_once_its_turn_comes(
    pg_store: PostgresStore,
) -> None:
    # A lane's lock just released may still go to a waiter first: here a batch whose
    # connection was lost, which replaces it. The lone write queued behind must then use
    # the new connection, not the lost one it saw before its turn (it failed with
    # "no connection to the server" as a StoreError, when every connection was killed).
    await pg_store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    await pg_store.write(
        journal_ops.record_step(held("w1"), step_record("r1", 1))
    )  # lane 0 is connected
    writer = pg_store._writer
    assert writer is not None
    lost = writer._conns[0]
    assert lost is not None and writer._fast[0] is not None
    lane0, lane1 = writer._locks
    await lane0.acquire()
    await lane1.acquire()  # busy: the lone write must take lane 0

    async def replace_the_connection() -> None:
        async with lane0:
            await lost.close()
            await writer._drop_connection(0)
            await writer._connection(0)

    replacing = asyncio.create_task(replace_the_connection())
    await asyncio.sleep(0)  # it waits for lane 0
    lane0.release()  # lane 0 looks free, but its waiter goes first
    try:
        await pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", 2)))
    finally:
        lane1.release()
        await replacing

    assert writer._conns[0] is not lost
    assert [s.seq for s in await pg_store.read(journal_ops.load_journal("r1"))] == [1, 2]


async def test_a_lane_promised_to_a_waiting_task__is_not_taken_by_a_new_write(
    pg_store: PostgresStore,
) -> None:
    # Between a lane's release and its waiter's wake-up the lock looks free. A write that
    # took the lane then waited behind that waiter, and the next did the same: under 200
    # runs at once every write ended up committed alone, one after another (a round of
    # bench.ceiling in ten ran at a quarter of the speed). Such a write goes to the queue
    # instead, and is committed with the others in the next batch.
    await pg_store.write(run_ops.create_run(run_record("r1", status="RUNNING", owner="w1")))
    writer = pg_store._writer
    assert writer is not None
    lane0, lane1 = writer._locks
    await lane0.acquire()
    await lane1.acquire()

    async def wait_for_lane0() -> None:
        async with lane0:
            pass

    waiting = asyncio.create_task(wait_for_lane0())
    await asyncio.sleep(0)  # it waits for lane 0
    lane0.release()  # lane 0 is its waiter's; lane 1 is held
    try:
        assert writer._free_lane() is None
        await pg_store.write(journal_ops.record_step(held("w1"), step_record("r1", 1)))
    finally:
        lane1.release()
        await waiting
    assert writer._free_lane() == 0
    assert [s.seq for s in await pg_store.read(journal_ops.load_journal("r1"))] == [1]


@pytest.mark.parametrize("migrated", [True, False], ids=["migrated", "empty"])
async def test_open__a_connection_lost_while_migrating_is_retried(
    pg_url: str, migrated: bool
) -> None:
    # A worker starting while the network flaps: the reply to the read of the applied
    # migrations (on a migrated database, which opening only reads) or to the migration's
    # first INSERT (on an empty one) never arrives.
    from tests.chaos.proxy import WRITES, LosingProxy

    from cairn.store import migrate

    server, database = admin(pg_url)
    if not migrated:
        database = f"{database}_empty"
        execute(server, f"CREATE DATABASE {database}")
    # The read of the applied versions is told by its row count: one per migration (the
    # pool's connections, opening meanwhile, read one row each).
    kinds = (f"SELECT {len(migrate.available('postgres'))}",) if migrated else WRITES
    proxy = LosingProxy(("127.0.0.1", 5432), rate=1.0, budget=1, kinds=kinds)
    store = PostgresStore(proxy.url(database), retry_for=10.0)
    try:
        await store.open()
        await store.close()
        versions = execute(f"{server.rsplit('/', 1)[0]}/{database}", MIGRATIONS)
    finally:
        proxy.close()
        if not migrated:
            execute(server, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    assert sum(proxy.lost.values()) == 1, proxy.lost
    assert [v for (v,) in versions] == [m.version for m in migrate.available("postgres")]


MIGRATIONS = "SELECT version FROM cairn_migrations ORDER BY version"


async def test_open__a_server_that_never_answered_fails_at_once(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A wrong port is a mistake to report, not an outage to wait out for retry_for.
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/nowhere", retry_for=30.0)
    with pytest.raises(StoreError, match=r"^cannot open database postgresql://.*:1/nowhere: "):
        await store.open()
    assert "retrying" not in caplog.text


async def test_a_commit_whose_reply_is_lost__counts_as_trouble_though_it_committed(
    pg_url: str,
) -> None:
    # A worker whose COMMIT reply was lost met the outage as much as one whose statement
    # was: it must not judge others by heartbeats that could not land meanwhile either.
    from tests.chaos.proxy import LosingProxy

    _, database = admin(pg_url)
    proxy = LosingProxy(("127.0.0.1", 5432), rate=1.0, budget=0)
    store = PostgresStore(proxy.url(database), retry_for=10.0)
    try:
        await store.open()
        proxy.budget = 1  # from now on: the next COMMIT's reply

        def with_xid() -> Program[str]:
            (xid,) = yield Sql("SELECT txid_current()::text", (), "one")
            return str(xid)

        assert await store.write(with_xid)  # found committed: its outcome stands
        assert dict(proxy.lost) == {"COMMIT": 1}
        assert store.health.trouble_at() > 0.0
    finally:
        proxy.close()
        await store.close()


async def test_a_commit_whose_reply_is_lost_and_whose_fate_cannot_be_asked__is_unknown(
    pg_url: str,
) -> None:
    # The network goes down right after the server committed: the store cannot ask how
    # the transaction ended. Its caller must hear that it may have committed (`unknown`),
    # not a plain outage after which sending it again is safe.
    from tests.chaos.proxy import LosingProxy

    _, database = admin(pg_url)
    proxy = LosingProxy(("127.0.0.1", 5432), rate=1.0, budget=0, then_down=True)
    store = PostgresStore(proxy.url(database), retry_for=1.0)
    try:
        await store.open()
        proxy.budget = 1

        def with_xid() -> Program[str]:
            (xid,) = yield Sql("SELECT txid_current()::text", (), "one")
            return str(xid)

        with pytest.raises(StoreUnavailable) as caught:
            await store.write(with_xid)
    finally:
        proxy.close()
        await store.close()
    assert dict(proxy.lost) == {"COMMIT": 1}
    assert caught.value.unknown, caught.value
    assert "the transaction's fate is unknown" in str(caught.value)


async def test_many_queued_writes_cancelled_at_once__the_rest_go_on_in_order(
    pg_store: PostgresStore,
) -> None:
    # A mass cancel (a worker stopping with many runs): writes queued behind two busy lanes
    # are withdrawn in no particular order. Each is marked, not searched for in the queue
    # (bench.withdrawals counts it); the lanes pass the withdrawn ones over, and the
    # others, in between them and in more than one batch, are committed.
    writer = pg_store._writer
    assert writer is not None
    for lock in writer._locks:
        await lock.acquire()
    names = [f"w{i:04}" for i in range(1200)]  # more than two batches (MAX_BATCH 500)
    tasks = [
        asyncio.ensure_future(pg_store.write(workers.register_worker(worker_record(name))))
        for name in names
    ]
    while len(writer._queue) < len(names):
        await asyncio.sleep(0)
    cancelled = set(names[::3]) | set(names[:50]) | set(names[-50:])
    for name, task in reversed(list(zip(names, tasks, strict=True))):
        if name in cancelled:
            task.cancel()
    await asyncio.sleep(0)
    assert writer._waiting == len(names) - len(cancelled)
    for lock in writer._locks:
        lock.release()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert [isinstance(o, asyncio.CancelledError) for o in outcomes] == [
        name in cancelled for name in names
    ]
    stored = {w.worker_id for w in await pg_store.read(workers.list_workers())}
    assert stored == set(names) - cancelled
    assert not writer._queue and writer._waiting == 0
    assert writer._free_lane() is not None  # nothing is left queued: a write goes at once
