"""PostgresStore: the shared programs on PostgreSQL (psycopg 3, a connection pool).

Any number of processes on any number of machines share one database. The hot one-round
writes of runs share commits through one writer (group commit, see `group_commit`); the
other programs run alone, each in its own transaction. Claims use FOR UPDATE SKIP LOCKED,
and commits that make a run claimable send NOTIFY cairn_runs, on which `wait_for_work`
returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from cairn import cancelling
from cairn.errors import ConfigError, StoreError
from cairn.models import RunStatus
from cairn.store import _sql, write_tally
from cairn.store._health import StoreHealth
from cairn.store._wakeups import WakeSignal
from cairn.store.locations import redact
from cairn.store.postgres import (
    connections,
    dialect,
    generic_plans,
    group_commit,
    listener,
    opening,
    sessions,
    stalls,
    transactions,
)
from cairn.store.postgres.connections import Db, Native, Pool
from cairn.store.postgres.group_commit import NOW
from cairn.store.postgres.run_reader import RunReader
from cairn.store.postgres.side_channel import PostgresSideChannel
from cairn.store.postgres.writes import Writes
from cairn.store.programs import claims, runs, workers
from cairn.store.programs.base import Operation, Program, Sql
from cairn.store.records import Claimed, RunRecord
from cairn.store.sql_store import SqlStore
from cairn.store.stream_bells import StreamBells

T = TypeVar("T")
log = logging.getLogger("cairn.store.postgres")

# Seconds `close` waits for the pool's own tasks (opening connections) to end.
CLOSE_WAIT = 0.5
# Seconds `close` waits for the writes queued or in flight to commit.
WRITES_WAIT = 1.0


def conninfo(url: str) -> str:
    """The libpq URL for a cairn PostgreSQL URL (postgresql://, postgres://, postgresql+x://)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ConfigError(f"invalid PostgreSQL URL {redact(url)!r} (use postgresql://...)")
    return f"postgresql://{rest}"


class PostgresStore(SqlStore):
    """The Store protocol on one PostgreSQL database."""

    dialect = "postgres"
    # Wake times travel with NOTIFY (and this store's own commits), and the next one due
    # is read whenever LISTEN starts: workers need no read of their own before a wait.
    wakes_for_timers = True

    def __init__(
        self,
        url: str,
        *,
        min_connections: int = 2,
        max_connections: int = 10,
        retry_for: float = 30.0,
        stalled_after: float = 5.0,
        idle_in_transaction_timeout: float | None = sessions.IDLE_IN_TRANSACTION_TIMEOUT,
    ) -> None:
        """Configure a store (nothing connects before `open`).

        Args:
            url: `postgresql://user:password@host:port/database` (or `postgres://`).
            min_connections: Connections the pool keeps open (at least 3).
            max_connections: Connections the pool may open (plus one for LISTEN).
            retry_for: Seconds to keep retrying while the server is unreachable (a
                restart) before an operation fails with StoreError.
            stalled_after: Seconds without a reply after which a connection's server
                backend is looked up: a connection the server is not working for (its
                reply was lost) is dropped and its work retried on a new one.
            idle_in_transaction_timeout: Seconds a session of cairn's may stay idle
                inside a transaction before the server ends it (its locks with it): what
                bounds how long a lost transaction step's session holds its run. None or
                0 leaves the server's setting; an `options` in the URL that sets
                `idle_in_transaction_session_timeout` wins. See sessions.
        """
        if stalled_after <= 0:
            raise ValueError(f"stalled_after must be positive, got {stalled_after!r}")
        self.url = url
        self._conninfo = sessions.conninfo(stalls.with_dead_peer_detection(conninfo(url)))
        self._idle_timeout = sessions.idle_timeout(self._conninfo, idle_in_transaction_timeout)
        self._sessions = sessions.Sessions()
        self._stalled_after = stalled_after
        self.where = redact(url)
        self._min = max(3, min_connections)
        self._max = max(self._min + 1, max_connections)
        self._retry_for = retry_for
        self.health = StoreHealth()
        self._db: Db | None = None
        self._pool: Pool | None = None
        self._writer: group_commit.Writer | None = None
        self._writes: Writes | None = None
        self._reader: RunReader | None = None
        self._bulk: dict[str, dialect.Bulk] = {}
        self._listener: asyncio.Task[None] | None = None
        self._stalls: stalls.StallWatch | None = None
        self._signal = WakeSignal()
        self._step_pool: transactions.SyncPool | None = None  # sync transaction steps' (lazily)
        # Pages whose plan fits every value: their own connections, opened on first use.
        self._one_plan = generic_plans.GenericPlanReads(
            self._conninfo, self.where, retry_for, self.health
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    @property
    def pool(self) -> Pool:
        """The open connection pool; StoreError if the store is closed."""
        if self._pool is None:
            raise StoreError(f"store {self.where} is not open")
        return self._pool

    @property
    def db(self) -> Db:
        """The pool with its retry settings; StoreError if the store is closed."""
        if self._db is None:
            raise StoreError(f"store {self.where} is not open")
        return self._db

    async def open(self, *, migrate: bool = True) -> None:
        """Connect, apply pending migrations and start the writer (see LifecycleStore.open)."""
        if self._pool is not None:
            return
        pool: Pool = AsyncConnectionPool(
            self._conninfo,
            min_size=self._min,
            max_size=self._max,
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            name="cairn",
        )
        # The pool connects while the schema is checked on a connection of its own: its
        # connections touch no table, and neither has to wait for the other.
        filling = asyncio.ensure_future(pool.open(wait=True, timeout=30.0))
        try:
            self._bulk = await opening.prepare(self._conninfo, self.where, self._retry_for, migrate)
            await filling
        except BaseException as exc:
            filling.cancel()
            with contextlib.suppress(BaseException):
                await filling
            await pool.close()
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"cannot open database {self.where}: {exc}") from exc
            raise
        self._pool = pool
        self._db = Db(pool, self.where, self._retry_for, self.health)
        self._signal = WakeSignal()
        self._writer = group_commit.Writer(self._db, on_commit=self._signal.wake_times)
        self._writer.start()
        self._writes = Writes(self._db, self._writer, self._bulk, self._signal)
        self._reader = RunReader(self._db)
        self._stalls = stalls.StallWatch(
            self._conninfo,
            self.where,
            self.health.waits,
            after=self._stalled_after,
            on_dropped=self._renew_connections,
        )
        self._stalls.start()

    async def _configure(self, conn: connections.Conn) -> None:
        await sessions.configure(conn, self._idle_timeout)

    async def _renew_connections(self) -> None:
        """After a dead connection: the others opened before it may be dead as well."""
        drain = getattr(self._pool, "drain", None)  # psycopg_pool 3.3 and later
        if drain is not None:
            await drain()
        if self._listener is not None:
            self._listener.cancel()  # `wait_for_work` listens again on a new connection
            self._listener = None

    async def close(self) -> None:
        """Commit queued writes, stop listening and close every connection."""
        if self._pool is None:
            return
        if self._listener is not None:
            await cancelling.stop([self._listener])
            self._listener = None
        if self._writer is not None:
            # A write stuck on a hung path (no error, no reply) is left: its attempt is over.
            with contextlib.suppress(TimeoutError):
                await cancelling.bounded(self._writer.stop(), WRITES_WAIT)
            self._writer = self._writes = None
        if self._stalls is not None:
            await self._stalls.stop()
            self._stalls = None
        self._reader = self._db = None
        await self._one_plan.close()
        if self._step_pool is not None:
            step_pool, self._step_pool = self._step_pool, None
            await asyncio.to_thread(step_pool.close)
        pool, self._pool = self._pool, None
        # Not the default 5 s: a pool worker still connecting to a silent server is left.
        await pool.close(timeout=CLOSE_WAIT)
        await connections.settle(CLOSE_WAIT)

    def side_channel(self) -> PostgresSideChannel:
        """A connection of its own for the heartbeat thread."""
        return PostgresSideChannel(self._conninfo, where=self.where)

    # running programs

    async def write(self, make: Callable[[], Program[T]]) -> T:
        """Run an operation (or the program `make()` builds) by its path (see writes).

        An operation whose program declares a path hint (`@path`, its rounds and wake-up)
        may share a commit; any other write runs alone in its own transaction.
        """
        if write_tally.ACTIVE:  # a caller keeps a tally (nearly never): count this write
            write_tally.asked()  # once sent, a write may be made though its writer gave up
        if isinstance(make, Operation):
            if make.kind is runs.create_run:
                return await self._create_run(*make.args)  # type: ignore[return-value]
            if make.kind is claims.claim:
                return await self._claim_runs(make)  # type: ignore[return-value]
            if (known := make.path()) is not None:
                return await self.writes.write(make, known[1], rounds=known[0])  # type: ignore[no-any-return]
        return await self._alone(make)

    async def _alone(self, make: Callable[[], Program[T]]) -> T:
        """Run a write alone in its own transaction (waking workers if it `@wakes`)."""
        program = make()
        wake = NOW if isinstance(make, Operation) and make.kind.wakes else None
        return await self.writes.started_alone(program, make, wake)

    async def read(self, make: Callable[[], Program[T]]) -> T:
        """Run a read-only program, each statement on a pooled connection.

        Reads of one run by id share a query (see `_get_run`); an operation declared
        `@one_plan` for its arguments goes to `read_one_plan`.
        """
        if isinstance(make, Operation):
            if make.kind is runs.get_run:
                return await self._get_run(*make.args)  # type: ignore[return-value]
            if make.one_plan():
                return await self.read_one_plan(make)
        return await connections.read(self.db, make())

    async def read_one_plan(self, make: Callable[[], Program[T]]) -> T:
        """`read`, on connections that plan such statements once (see generic_plans)."""
        if self._pool is None:
            raise StoreError(f"store {self.where} is not open")
        return await self._one_plan.read(make())

    @property
    def writes(self) -> Writes:
        """Where this store's writes start (see `writes`); StoreError if the store is closed."""
        if self._writes is None:
            raise StoreError(f"store {self.where} is not open")
        return self._writes

    # the two operations this store runs its own way

    async def _create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """runs.create_run: without a dedup key, the insert alone is one round."""
        wake = (run.wake_at or NOW) if run.status == RunStatus.PENDING else None
        if run.dedup_key is not None:  # the key is checked first: not one round
            try:
                return await self.writes.alone(runs.create_run(run), wake)
            except StoreError as exc:
                if not connections.dedup_clash(exc):
                    raise
                # A concurrent start took the key between our check and our insert; asked
                # again, the program names the holder (DuplicateRun).
                return await self.writes.alone(runs.create_run(run), wake)

        def insert() -> connections.Program[bool]:
            # The shared program's first statement; the existing run is read afterwards.
            inserted = yield Sql(_sql.INSERT_RUN, _sql.run_params(run))
            return bool(inserted)

        if await self.writes.write(insert, wake, rounds="one"):
            return run, True
        existing = await self._get_run(run.run_id)
        if existing is None:
            raise StoreError(f"database {self.where}: run {run.run_id!r} vanished")
        return existing, False

    async def _get_run(self, run_id: str) -> RunRecord | None:
        """runs.get_run: concurrent calls share one query."""
        if self._reader is None:
            raise StoreError(f"store {self.where} is not open")
        row = await self._reader.get(run_id)
        return None if row is None else _sql.run_from_row(row)

    async def begin_step_transaction(
        self, *, sync: bool, timeout: float | None = None
    ) -> transactions.PgStepTransaction | transactions.PgSyncStepTransaction:
        """BEGIN for a `@cairn.transaction` step, off the group-commit path (see transactions)."""
        if not sync:
            return await transactions.begin(self.pool, self.where, timeout)
        if self._step_pool is None:
            if self._pool is None:
                raise StoreError(f"store {self.where} is not open")
            self._step_pool = transactions.open_sync_pool(
                self._conninfo, self._max, self._idle_timeout
            )
        return await asyncio.to_thread(
            transactions.begin_sync, self._step_pool, self.where, timeout
        )

    async def _claim_runs(self, op: Operation[Claimed]) -> Claimed:
        """claims.claim: atomically take due and orphaned runs.

        One read first asks whether any candidate exists (`claims.idle_probe`), so that the
        common idle claim costs one round trip instead of a locking transaction.
        """
        worker_id, limit = op.args
        options = op.kwargs
        if limit > 0 and all(value != [] for value in options.values()):
            get = options.get
            reads = claims.idle_probe(
                worker_id,
                options["now"],
                options["stale"],
                get("queues"),
                get("workflows"),
                get("only"),
                get("skip"),
            )
            probe = "SELECT " + " OR ".join(f"EXISTS ({dialect.convert(r.text)})" for r in reads)
            found = _fetch_one(probe, [param for r in reads for param in r.params])
            if not await connections.read(self.db, found):
                return Claimed([], {}, {})
            claimed = await self._alone(op)
            if len(claimed.runs) < limit:  # some candidates were locked, maybe for good
                try:
                    await self._sessions.check(self.db, options["now"])
                except StoreError as exc:  # only a reason shown: the claim stands
                    log.debug("cairn: cannot look for lost sessions: %s", exc)
            return claimed
        return await self._alone(op)

    # wake-ups

    async def _next_wake(self) -> float | None:
        return await self.read(workers.next_wake())

    async def wait_for_work(self, timeout: float) -> None:
        """Return when runs may have become claimable, or after `timeout` seconds.

        Wake-ups come from NOTIFY cairn_runs (sent with every commit, by any process,
        that makes a run claimable) and from this store's own writes. They are hints:
        polling every `timeout` seconds still finds what no notification reports (a dead
        worker's lease running out) or what a lost connection missed.
        """
        self._listen()
        await self._signal.wait(timeout)

    def stream_bells(self) -> StreamBells:
        """The stream bells, which NOTIFY cairn_streams from any process rings (see listener)."""
        self._listen()
        return super().stream_bells()

    def _listen(self) -> None:
        """Start listening (in the running loop), unless this store listens already."""
        if self._pool is not None and self._listener is None:
            listening = listener.listen(
                self._conninfo,
                self.where,
                self._signal,
                self.health,
                self._next_wake,
                super().stream_bells(),
            )
            self._listener = asyncio.create_task(listening, name="cairn-pg-listen")


def _fetch_one(text: str, params: Sequence[Any]) -> connections.Program[Any]:
    row = yield Native(text, params, "one")
    return None if row is None else row[0]
