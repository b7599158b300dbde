"""Group commit for PostgresStore: one-round writes share implicit transactions.

A write that sends everything in one round (one statement, or statements that need no
result from each other) is a "shot". The writer drains every queued shot into one
implicit transaction in pipeline mode: one round trip and one commit for the batch, and
shots whose statement has a bulk form share one statement. A shot's future is resolved
only after its commit. A shot that raises LeaseLost is answered with it and the batch
goes on; a batch that fails is retried one shot per transaction; a batch that loses its
connection (the server restarted) is retried on a new one for up to `retry_for` seconds
before its shots fail with StoreUnavailable (sent again, they are "ambiguous": see
shots). A shot not sent yet when its caller gives up (still queued, or in a batch whose
lane waits for a connection) is withdrawn in constant time, and never sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from cairn.errors import StoreError, StoreUnavailable
from cairn.store import write_tally
from cairn.store.postgres import dialect, write_shapes
from cairn.store.postgres.connections import (
    Conn,
    Db,
    Disconnected,
    Program,
    Request,
    first_line,
    is_lost,
    payload,
    results,
    rollback,
    send_all,
    statement_count,
    store_error,
)
from cairn.store.postgres.fast_path import FastPath
from cairn.store.postgres.lanes import LaneLock
from cairn.store.postgres.shots import Shot

log = logging.getLogger("cairn.store.postgres")

MAX_BATCH = 500
NOW = 0.0  # a wake time meaning "claimable now"
LOST = -1  # what `Writer.lone` answers when its connection was lost after sending


class Writer:
    """The group-commit writer of one store: a queue of shots and the lanes that drain it.

    Each lane is a task with its own connection that takes everything queued when it is
    free. With two lanes, one batch is built and sent while the previous one waits for
    its commit to reach the disk. A shot that finds nothing queued and a lane free is
    committed at once by its own caller on that lane's connection: one run alone then
    pays for no hand-over between tasks.
    """

    def __init__(
        self,
        db: Db,
        *,
        on_commit: Callable[[list[float]], None],
        lanes: int = 2,
    ) -> None:
        self._db = db
        self._pool = db.pool
        self._where = db.where
        self._retry_for = db.retry_for
        self._on_commit = on_commit
        self._lanes = lanes
        self._queue: deque[Shot] = deque()  # withdrawn ones stay until a lane passes them
        self._waiting = 0  # shots in the queue not withdrawn
        self._ready = asyncio.Event()
        self._conns: list[Conn | None] = [None] * lanes
        self._fast: list[FastPath | None] = [None] * lanes
        self._locks = [LaneLock() for _ in range(lanes)]  # who uses a lane's connection
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    def start(self) -> None:
        """Start the lanes in the running loop."""
        self._tasks = [
            asyncio.create_task(self._run(lane), name=f"cairn-pg-writer-{lane}")
            for lane in range(self._lanes)
        ]

    async def stop(self) -> None:
        """Commit what is queued, then stop and give the connections back."""
        self._closing = True
        self._ready.set()
        await asyncio.gather(*self._tasks)
        self._tasks = []
        for lane in range(self._lanes):
            async with self._locks[lane]:
                await self._drop_connection(lane)

    async def commit(self, shot: Shot) -> Any:
        """Commit a shot and return its outcome (or raise its error) once committed.

        A caller that gives up (is cancelled) before its shot is sent withdraws it: still
        queued, in a batch whose lane waits for a connection, or waiting for one itself
        to commit it at once. It is never sent, and its tally counts it withdrawn
        (store/write_tally.py). One sent (its batch on a connection) may be made yet.
        """
        if not self._tasks or self._closing:
            raise StoreError(f"store {self._where} is not open")
        lane = self._free_lane()
        if lane is not None:
            async with self._locks[lane]:  # free: nobody holds it or waits for it
                await self._commit_now(lane, shot)
            return await shot.future
        shot.queued = True
        self._queue.append(shot)
        self._waiting += 1
        self._ready.set()
        try:
            return await shot.future
        except asyncio.CancelledError:
            self._withdraw(shot)
            raise

    def _withdraw(self, shot: Shot) -> None:
        """Withdraw a shot whose caller gave up, unless sent (a lane passes it over)."""
        if shot.done or shot.sending:
            return  # on a connection: it may be made
        shot.done = True
        if shot.queued:
            shot.queued = False
            self._waiting -= 1
            if not self._waiting:
                self._queue.clear()  # only withdrawn shots are left
        # One sent before on a lost connection may have committed then: not "unchanged".
        if not shot.ambiguous:
            write_tally.withdrawn()

    async def lone(self, text: str, params: Sequence[Any]) -> int | None:
        """Run one row-count statement now, committed alone; the rows it touched.

        Only when nothing is queued and a lane with a connection is free; otherwise None,
        or LOST if that connection turned out lost once the statement was sent: the caller
        then goes through `commit` (which waits its turn, or retries on a new connection;
        after LOST, as an ambiguous shot). This is the whole cost of a step of a run
        alone, so it skips everything a batch needs.
        """
        if self._closing or not self._tasks:
            return None
        lane = self._free_lane()
        if lane is None or self._fast[lane] is None:  # no connection yet: `commit` gets one
            return None
        async with self._locks[lane]:
            # Read again once held (a free lane is taken without waiting, but a waiter
            # that went first would have replaced a lost connection meanwhile).
            fast = self._fast[lane]
            if fast is None:
                return None
            return await self._lone_on(lane, fast, text, params)

    def _free_lane(self) -> int | None:
        """A lane nobody holds or waits for, if nothing is queued (else wait your turn)."""
        if self._waiting:
            return None
        for lane, lock in enumerate(self._locks):
            if lock.free():
                return lane
        return None

    async def _lone_on(
        self, lane: int, fast: FastPath, text: str, params: Sequence[Any]
    ) -> int | None:
        try:
            return await fast.count(text, params)
        except asyncio.CancelledError:
            await self._drop_connection(lane)  # its statement may be in flight
            raise
        except (psycopg.Error, Disconnected, UnicodeError) as exc:
            if is_lost(self._conns[lane], exc):
                self._db.health.trouble()
                await self._drop_connection(lane)
                return LOST
            raise store_error(self._where, exc) from exc

    async def _commit_now(self, lane: int, shot: Shot) -> None:
        try:
            await self._commit(lane, [shot])
        except asyncio.CancelledError:
            if shot.done:
                raise
            if shot.sending:  # its statement may be in flight: the connection is unusable
                await self._drop_connection(lane)
            else:  # cut off waiting for a connection, or to retry: not sent (now)
                self._withdraw(shot)
            raise
        except Exception as exc:  # a bug here must not leave the caller waiting forever
            log.exception("cairn: PostgreSQL writer failed")
            shot.settle(store_error(self._where, exc))

    async def _run(self, lane: int) -> None:
        while True:
            await self._ready.wait()
            while self._waiting:
                async with self._locks[lane]:
                    batch = self._take()
                    if not batch:
                        continue  # the other lane, or withdrawals, emptied the queue
                    try:
                        await self._commit(lane, batch)
                    except Exception as exc:  # a bug must not leave writers waiting forever
                        log.exception("cairn: PostgreSQL writer failed")
                        for shot in batch:
                            if not shot.done:
                                shot.settle(store_error(self._where, exc))
            self._ready.clear()
            if self._closing:
                self._ready.set()  # let the other lanes see it too
                return

    def _take(self) -> list[Shot]:
        """Up to MAX_BATCH shots from the head of the queue, passing withdrawn ones over."""
        batch: list[Shot] = []
        queue = self._queue
        while queue and len(batch) < MAX_BATCH:
            shot = queue.popleft()
            if shot.queued:
                shot.queued = False
                batch.append(shot)
        self._waiting -= len(batch)
        if not self._waiting:
            queue.clear()  # only withdrawn shots are left
            self._ready.clear()
        return batch

    async def _commit(self, lane: int, batch: list[Shot]) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + self._retry_for
        delay = 0.01
        while True:
            todo = [shot for shot in batch if not shot.done]
            if not todo:
                if delay > 0.01:
                    self._db.health.waited(loop.time() - started)
                return
            sent = False
            try:
                conn = await self._connection(lane)
                fast = self._fast[lane]
                assert fast is not None
                # Callers that gave up while the lane waited for it withdrew theirs.
                todo = [shot for shot in todo if not shot.done]
                if not todo:
                    continue
                for shot in todo:
                    shot.sending = True
                sent = True
                runs = tuple({shot.run for shot in todo if shot.run is not None})
                waiting = self._db.health.waits.begin(conn, runs)
                try:
                    await self._apply(conn, fast, todo)
                finally:
                    self._db.health.waits.end(waiting)
                continue  # settled: the top of the loop returns
            except Disconnected as exc:
                self._db.health.trouble()
                for shot in todo:  # sent, they may have committed before the reply was
                    shot.sending = False  # lost (said before the drop: a caller cut off
                    shot.ambiguous |= sent  # in it must see it)
                await self._drop_connection(lane)
                cause = exc.__cause__ or exc
                if loop.time() >= deadline:
                    message = f"unreachable for {self._retry_for:g}s ({first_line(cause)})"
                    for shot in todo:
                        shot.settle(StoreUnavailable(f"database {self._where}: {message}"))
                    return
                log.warning("cairn: lost %s (%s); retrying", self._where, first_line(cause))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    async def _connection(self, lane: int) -> Conn:
        conn = self._conns[lane]
        if conn is None:
            try:
                conn = await self._pool.getconn(timeout=max(0.1, self._retry_for))
            except psycopg.Error as exc:
                raise Disconnected() from exc
            self._conns[lane] = conn
            self._fast[lane] = FastPath(conn, self._db.health.waits)
        return conn

    async def _drop_connection(self, lane: int) -> None:
        conn, self._conns[lane] = self._conns[lane], None
        fast, self._fast[lane] = self._fast[lane], None
        if fast is not None:
            fast.pause()
        if conn is not None:
            await self._pool.putconn(conn)  # the pool discards a broken connection

    async def _apply(self, conn: Conn, fast: FastPath, shots: list[Shot]) -> None:
        """Commit `shots` in one transaction, or each alone if that fails."""
        try:
            outcomes = await self._transaction(conn, fast, shots)
        except Exception as exc:
            if is_lost(conn, exc):
                raise Disconnected() from exc
            fast.pause()
            await rollback(conn)
            if len(shots) == 1:
                failed = isinstance(exc, psycopg.Error | UnicodeError)
                shots[0].settle(store_error(self._where, exc) if failed else exc)
                return
            # One bad write must not sink its neighbours: retry each in its own transaction.
            for shot in shots:
                await self._apply(conn, fast, [shot])
            return
        for shot, outcome in zip(shots, outcomes, strict=True):
            shot.settle(outcome)
        wakes = [shot.wake for shot in shots if shot.wake is not None]
        if wakes:
            self._on_commit(wakes)

    async def _transaction(self, conn: Conn, fast: FastPath, shots: list[Shot]) -> list[Any]:
        if len(shots) == 1 and shots[0].wake is None:
            # A lone statement is its own implicit transaction (the sequential case).
            program, request = shots[0].begin()
            lone = write_shapes.lone_statement(request)
            if lone is not None:
                return [write_shapes.outcome(program, await fast.count(*lone))]
            program.close()
        # Shots whose statement has a bulk form share one statement when there are several.
        kinds: dict[dialect.Bulk, list[int]] = {}
        for i, shot in enumerate(shots):
            if shot.bulk is not None:
                kinds.setdefault(shot.bulk, []).append(i)
        bulks = {bulk: members for bulk, members in kinds.items() if len(members) > 1}
        shared = {i for members in bulks.values() for i in members}
        singles = [i for i in range(len(shots)) if i not in shared]
        programs: dict[int, Program[Any]] = {}
        requests: dict[int, Request] = {}
        for i in singles:
            programs[i], requests[i] = shots[i].begin()
        wakes = [shot.wake for shot in shots if shot.wake is not None]
        bulk_sent = {}
        if len(bulks) == 1 and not singles and not wakes:
            # One statement for the whole batch (steps of runs side by side, mostly): its
            # own implicit transaction, straight through libpq like a lone write.
            [(bulk, members)] = bulks.items()
            returned = await fast.rows(bulk.text, bulk.params([shots[i].params for i in members]))
            return _bulk_outcomes(shots, bulk, members, returned, [None] * len(shots))
        fast.pause()  # psycopg takes the connection back
        if (
            not bulks
            and not wakes
            and len(singles) == 1
            and statement_count(requests[singles[0]]) == 1
        ):
            # A lone statement is its own implicit transaction; a pipeline would only add
            # its entry and exit (tens of µs: the sequential case).
            sent = {i: await send_all(conn, requests[i]) for i in singles}
        else:
            # Statements between two pipeline syncs form one implicit transaction.
            async with conn.pipeline():
                sent = {i: await send_all(conn, requests[i]) for i in singles}
                for bulk, members in bulks.items():
                    rows = [shots[i].params for i in members]
                    bulk_sent[bulk] = await conn.execute(bulk.text, bulk.params(rows))
                if wakes:
                    await conn.execute(dialect.NOTIFY, (payload(wakes),))
        outcomes: list[Any] = [None] * len(shots)
        for i in singles:
            outcomes[i] = write_shapes.outcome(programs[i], await results(requests[i], sent[i]))
        for bulk, members in bulks.items():
            returned = await bulk_sent[bulk].fetchall()
            outcomes = _bulk_outcomes(shots, bulk, members, returned, outcomes)
        return outcomes


def _bulk_outcomes(
    shots: list[Shot],
    bulk: dialect.Bulk,
    members: list[int],
    returned: Sequence[Sequence[Any]],
    outcomes: list[Any],
) -> list[Any]:
    """`outcomes` with those of `members`, from the keys their bulk statement returned."""
    written = Counter(tuple(row) for row in returned)
    for i in members:
        key = bulk.key(shots[i].params)
        hit = written[key] > 0
        written[key] -= 1  # the same row twice in a batch: only the first wrote
        program, _ = shots[i].begin()
        outcomes[i] = write_shapes.outcome(program, 1 if hit else 0)
    return outcomes
