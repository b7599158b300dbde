"""SqliteStore: the embedded backend (WAL, group commit on the event loop's thread).

Statements run synchronously on the event loop's thread: a WAL commit costs tens of
microseconds, less than handing work to another thread and back. Writes issued in the same
loop iteration share one transaction (group commit), and no writer is answered before its
transaction commits; a write alone that is one statement commits by itself. The loop
never waits for the write lock: while another connection holds it, `BEGIN IMMEDIATE` (or
the lone statement) fails at once and the batch is tried again a moment later, so
heartbeats, timers and other runs go on meanwhile.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence, Sized
from typing import Any, TypeVar

from cairn.errors import StoreError
from cairn.store import write_tally
from cairn.store._health import StoreHealth
from cairn.store._loop import answer, others_ready, ready_queue
from cairn.store._wakeups import WakeSignal
from cairn.store.programs.base import Fenced, Operation, Program
from cairn.store.protocol import LeaseLost
from cairn.store.sql_store import SqlStore
from cairn.store.sqlite.aside import read_aside
from cairn.store.sqlite.checkpoints import Checkpointer
from cairn.store.sqlite.connections import (
    AGAIN,
    SqliteSideChannel,
    Sunk,
    classify,
    commit_lone,
    execute,
    is_busy,
    open_main,
    read_again,
    run,
    run_in_savepoint,
)
from cairn.store.sqlite.failures import WriteFailures
from cairn.store.sqlite.schema import apply_migrations, check_file
from cairn.store.sqlite.transactions import SqliteStepTransaction, begin_immediate, own_connection
from cairn.store.write_tally import ACTIVE

T = TypeVar("T")
Make = Callable[[], Program[Any]]
_Pending = tuple[Program[Any] | Fenced, asyncio.Future[Any], Make]  # a program or statement
_Batch = Sequence[tuple[Program[Any] | Fenced, "asyncio.Future[Any] | None", Make]]

_FIRST_RETRY, _LAST_RETRY = 0.001, 0.05  # s: waiting for the write lock, doubling
_QUEUE: Any = object()  # _alone's answer: the write joins the queue instead


class SqliteStore(SqlStore):
    """The Store protocol on one SQLite file, or on a database in memory."""

    dialect = "sqlite"
    writes_on_loop = True  # group commits run on the loop's thread (see the module)

    def __init__(self, path: str, *, synchronous: str = "NORMAL", memory: bool = False) -> None:
        self.path = path
        # memory=True: `path` is the URI of an in-memory database that other stores of
        # this process may share. In memory, one connection: no WAL, no side channel.
        self._memory = memory or path == ":memory:"
        self.health = StoreHealth()
        self._failures = WriteFailures(path, self.health)
        self._synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._pending: list[_Pending] = []
        self._flush_scheduled = False
        self._gave_up = False  # a queued write's caller gave up: `_flush` withdraws it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: Sized | None = None  # the loop's ready callbacks (None: assume some)
        self._signal = WakeSignal()
        self._data_version: int | None = None
        self._checkpointer: Checkpointer | None = None
        # While another connection holds the write lock: since when, and the next delay.
        self._locked_since: float | None = None
        self._retry_delay = _FIRST_RETRY
        # A @cairn.transaction step's transaction is open: group commits wait for it.
        self._held = False
        self._step_lock: asyncio.Lock | None = None  # one step transaction at a time
        self._step_conn: sqlite3.Connection | None = None  # its own connection (a file)
        # The task that opened the step transaction: its own writes would wait for it.
        self._holder: asyncio.Task[Any] | None = None

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection; StoreError if the store is closed."""
        if self._conn is None:
            raise StoreError(f"store {self.path!r} is not open")
        return self._conn

    async def open(self, *, migrate: bool = True) -> None:
        """Connect, switch to WAL and apply pending migrations (see LifecycleStore.open).

        In memory, `migrate=False` migrates all the same: that database is this
        process's own, not one a typo could bring into existence.
        """
        if self._conn is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._ready = ready_queue(self._loop)
        if not self._memory:
            check_file(self.path, migrate=migrate)  # before anything creates or writes it
        self._conn = conn = await open_main(self.path, self._memory, self._synchronous)
        apply_migrations(conn, repr(self.path))
        conn.execute("PRAGMA busy_timeout=0")
        if not self._memory:
            conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread does it
            self._checkpointer = Checkpointer(self.path)
            self._checkpointer.start()

    async def close(self) -> None:
        """Flush pending writes still awaited (waiting for the write lock if need be); close."""
        while self._abandon_cancelled() and self._conn is not None:
            self._flush()
            if self._pending:
                await asyncio.sleep(_LAST_RETRY)
        for conn in (self._conn, self._step_conn):
            if conn is not None:
                conn.close()
        self._conn = self._step_conn = None
        if self._checkpointer is not None:
            self._checkpointer.stop()
            self._checkpointer = None

    def side_channel(self) -> SqliteSideChannel | None:
        """A connection of its own for the heartbeat thread (none for `:memory:`)."""
        return None if self._memory else SqliteSideChannel(self.path)

    # group commit

    def _write(self, program: Any, make: Make) -> asyncio.Future[Any]:
        if self._held and self._holder is not None and asyncio.current_task() is self._holder:
            if type(program) is not tuple:
                program.close()
            raise StoreError(
                f"database {self.path!r}: a @cairn.transaction step's function wrote through "
                "the engine (engine.start, send_event...) while its own transaction holds "
                "the write lock: that write would wait for it forever"
            )
        loop = self._loop or asyncio.get_running_loop()
        # The future made directly: loop.create_future is one more Python call per write.
        future: asyncio.Future[Any] = asyncio.Future(loop=loop)
        self._pending.append((program, future, make))
        if self._flush_scheduled or self._locked_since is not None or self._held:
            return future  # the flush due, or the batch waiting for the lock, takes it along
        if not others_ready(loop):
            # Nobody else can add to this batch before the loop idles: commit now and
            # save the writer a trip around the event loop.
            self._flush()
            return future
        self._flush_scheduled = True
        loop.call_soon(self._flush)
        return future

    def _abandon_cancelled(self) -> bool:
        """Drop the writes whose callers gave up waiting for the lock; True if any is left.

        Such a caller (a stop's bounded hand-back) takes its write as not written: it must
        not commit later, nor keep `close` waiting for a lock another connection holds.
        """
        for program, future, _ in self._pending:
            if future.done() and not isinstance(program, tuple):
                program.close()
        self._pending = [entry for entry in self._pending if not entry[1].done()]
        return bool(self._pending)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._gave_up:  # a writer gave up before its batch was made: withdraw its write
            self._gave_up = False
            if not self._abandon_cancelled() and self._locked_since is not None:
                # Everyone waiting for the lock gave up: stop waiting (the next write flushes).
                self._locked_since, self._retry_delay = None, _FIRST_RETRY
        if not self._pending or self._held:
            return  # a step transaction holds the write path: it flushes when it ends
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if is_busy(exc):
                self._wait_for_lock()
                return
            answer(self._pending, [self._failures.classify(exc)] * len(self._pending))
            self._pending = []
            return
        if self._locked_since is not None:
            self.health.waited(time.monotonic() - self._locked_since)
            self._locked_since = None
            self._retry_delay = _FIRST_RETRY
        batch, self._pending = self._pending, []
        answer(batch, self._commit(conn, batch))

    def _commit(self, conn: sqlite3.Connection, batch: _Batch) -> list[Any]:
        """Run `batch`'s programs in the open transaction and commit; each one's outcome."""
        try:
            return self._run_batch(conn, batch)
        except Sunk as sunk:
            # Nothing was written. A program cannot be run again (it is a generator
            # part-way through), so its neighbours get an error too.
            return [
                self._failures.failure(sunk.error)
                if program is sunk.program
                else self._failures.sunk(sunk)
                for program, _, _ in batch
            ]
        except sqlite3.Error as exc:
            # The transaction itself failed and nothing was written.
            return [self._failures.classify(exc) for _ in batch]

    def _wait_for_lock(self) -> None:
        """Another connection holds the write lock: try the batch again a moment later."""
        now = time.monotonic()
        if self._locked_since is None:
            self._locked_since = now
        elif now - self._locked_since >= 1.0:
            self.health.trouble()
        loop = self._loop or asyncio.get_running_loop()
        self._flush_scheduled = True
        loop.call_later(self._retry_delay, self._flush)
        self._retry_delay = min(self._retry_delay * 2, _LAST_RETRY)

    def _run_batch(self, conn: sqlite3.Connection, batch: _Batch) -> list[Any]:
        # The transaction is open (BEGIN IMMEDIATE). With neighbours in the batch, one bad
        # write is undone alone and must not sink the others, unless it is a single write.
        guard = len(batch) > 1
        try:
            outcomes = [self._run_one(conn, program, make, guard) for program, _, make in batch]
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return outcomes

    def _run_one(self, conn: sqlite3.Connection, program: Any, make: Make, guard: bool) -> Any:
        """Run one program (or fenced statement, see `write`) of a batch; its outcome."""
        if guard and not (
            type(make) is Operation and (make.kind.single_write_always or make.single_write())
        ):
            outcome = run_in_savepoint(conn, program)
            return self._failures.failure(outcome) if isinstance(outcome, Exception) else outcome
        # Alone in its batch, or a program that changes rows only with its last statement:
        # if it fails, there is nothing of it to undo, so no savepoint is needed.
        changes = conn.total_changes
        try:
            if type(program) is not tuple:
                return run(conn, program)
            if not execute(conn, program[0], program[1]).rowcount:  # what its program does
                raise LeaseLost(program[2])
            return None
        except Exception as exc:
            if conn.total_changes != changes or not conn.in_transaction:
                # It failed after changing rows (or SQLite rolled the transaction back).
                raise Sunk(program, exc) from exc
            return self._failures.failure(exc)

    def _alone(self, make: Callable[[], Program[T]], program: Program[T]) -> Any:
        """Commit `program` alone, now, if no other write can join its batch: no future.

        Asked only when no batch is forming or waiting (`write` looks first).

        Its outcome (a value or the exception it fails with), `_QUEUE` (it must queue), or
        AGAIN (a fresh program of `make` must queue). One statement commits by itself.
        """
        if (ready := self._ready) is None or ready:
            return _QUEUE  # other callbacks of this loop iteration may write: group commit
        conn = self._conn or self.conn  # the property raises if the store is closed
        lone = type(make) is Operation and (make.kind.lone_always or make.lone())
        if lone and not conn.in_transaction:
            outcome = commit_lone(conn, program)
            return self._failures.failure(outcome) if isinstance(outcome, Exception) else outcome
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return _QUEUE if is_busy(exc) else self._failures.classify(exc)
        return self._commit(conn, [(program, None, make)])[0]

    async def write(self, make: Callable[[], Program[T]]) -> T:
        """Run the program `make()` builds in a write transaction shared with others."""
        if ACTIVE:  # a caller keeps a tally (nearly never): count this write in it
            write_tally.asked()
        # A batch is forming, or waits for the lock or a step transaction: the write joins
        # it (nearly always, with many runs at once: asked here, not in a call). A fenced
        # write (a step's row) joins as its one statement, no program built and run.
        if self._pending or self._flush_scheduled or self._held or self._locked_since is not None:
            alone, fenced = _QUEUE, type(make) is Operation and make.kind.fenced
            program: Any = fenced(*make.args, **make.kwargs) if fenced else make()  # type: ignore[attr-defined]
        else:
            program = make()
            alone = self._alone(make, program)
        if alone is _QUEUE or alone is AGAIN:
            future = self._write(program if alone is _QUEUE else make(), make)
            try:
                outcome: T = await future
            except asyncio.CancelledError:
                if future.cancelled():  # not made yet: the next flush withdraws it
                    self._gave_up = True
                    write_tally.withdrawn()
                raise
        elif isinstance(alone, BaseException):
            raise alone
        else:
            outcome = alone
        if isinstance(make, Operation):
            if make.kind.wakes:
                self._signal.set()
            elif (after := make.kind.wakes_after) is not None:
                at = after(outcome, *make.args, **make.kwargs)
                if at is not None:
                    self._signal.at(at)
        return outcome

    async def begin_step_transaction(
        self, *, sync: bool, timeout: float | None = None
    ) -> SqliteStepTransaction:
        """Hold the group commit and BEGIN IMMEDIATE for a `@cairn.transaction` step.

        Writes already queued commit first; later ones queue until the step's transaction
        ends. Another process holding the write lock is waited for on the loop (where the
        step's timeout cancels the wait). Once begun, the step holds the write lock: no
        statement of it waits for a lock, and a long one is stopped by `interrupt`.
        """
        if self._step_lock is None:
            self._step_lock = asyncio.Lock()
        await self._step_lock.acquire()
        try:
            if self._pending and self._locked_since is None:
                self._flush()
            self._held = True
            self._holder = asyncio.current_task()  # an async step's function runs in it
            conn = self._step_connection()
            await begin_immediate(conn, repr(self.path))
        except BaseException:
            self._end_hold()
            raise
        return SqliteStepTransaction(conn, repr(self.path), self._end_hold)

    def _step_connection(self) -> sqlite3.Connection:
        if self._memory:
            return self.conn  # this store's only connection to its in-memory database
        if self._step_conn is None:
            self._step_conn = own_connection(self.path, self._synchronous, self._failures)
        return self._step_conn

    def _end_hold(self) -> None:
        """A step transaction ended: let the group commit go on with what queued meanwhile."""
        self._held = False
        self._holder = None
        if self._step_lock is not None and self._step_lock.locked():
            self._step_lock.release()
        if self._pending and not self._flush_scheduled:
            self._flush_scheduled = True
            (self._loop or asyncio.get_running_loop()).call_soon(self._flush)

    async def wait_for_work(self, timeout: float) -> None:
        """Return when runs may have become claimable, or after `timeout` seconds.

        This store's own writes wake it at once. SQLite cannot notify other processes, so
        their commits are noticed by checking PRAGMA data_version every 50 ms.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (left := deadline - loop.time()) > 0:
            if await self._signal.wait(min(left, 0.05)) or self._others_committed():
                return

    def _others_committed(self) -> bool:
        if self._conn is None:
            return False
        version = int(self._conn.execute("PRAGMA data_version").fetchone()[0])
        changed = self._data_version is not None and version != self._data_version
        self._data_version = version
        return changed

    async def read_aside(self, make: Callable[[], Program[T]]) -> T:
        """`read` in a thread, on a connection of its own (in memory: `read`)."""
        return await (self.read(make) if self._memory else read_aside(self.path, make()))

    async def read(self, make: Callable[[], Program[T]]) -> T:
        """Run a read-only program at once (WAL readers see the last commit).

        A reader does not wait for the write lock; should SQLite still answer busy (a
        checkpoint resetting the log), it is asked again a moment later.
        """
        try:
            return run(self.conn, make())
        except (sqlite3.Error, UnicodeError, ValueError) as exc:
            if not is_busy(exc):
                raise classify(repr(self.path), exc) from exc
        return await read_again(lambda: self.conn, repr(self.path), make)
