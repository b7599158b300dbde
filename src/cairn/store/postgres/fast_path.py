"""One-statement writes straight through libpq: the latency of steps run one after another.

A step of a lone run is one statement committed on its own, and its workflow waits for
it. Through psycopg's `execute` that statement costs about 190 µs of CPU (generators, a
reader added to and removed from the event loop per wait, query conversion) on top of
the round trip; here it costs 80-100 µs: psycopg's Transformer dumps the parameters,
the statement is prepared once per connection, and a reader stays registered on the
socket while a writer lane uses its connection this way.

When nothing else is ready to run, the reply is waited for in the kernel (`poll` on the
socket) rather than through the event loop, which saves the two loop iterations a reply
otherwise costs. The same `poll` watches the loop's own selector, so the wait ends as soon
as anything else (another connection's reply, a client's request) needs the loop: runs
executing side by side still overlap their commits. The wait is short (`_HERE_MS`), and
after `_HERE_ROUNDS` such waits in a row the next one goes through the loop, so a run
whose steps never yield keeps timers (heartbeats) waiting for `_HERE_ROUNDS` replies at
most.

The connection stays a psycopg connection: `pause()` hands it back (the pipelined
batches of `group_commit` use psycopg itself), and psycopg sees a broken socket as broken.
A wait through the loop is registered with the store's `Waits`, so that a reply that
never comes is noticed (`stalls` shuts such a connection down: the wait then ends
as for any lost connection).
"""

from __future__ import annotations

import asyncio
import itertools
import select
import time
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

from cairn.store._loop import others_ready
from cairn.store.postgres.connections import Conn, Disconnected
from cairn.store.postgres.dialect import numbered
from cairn.store.waits import Waits

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
_prepared: weakref.WeakKeyDictionary[Any, dict[tuple[str, tuple[int, ...]], bytes]] = (
    weakref.WeakKeyDictionary()
)
_serial = itertools.count(1)

# Connection exceptions, and the server shutting down or starting up.
_GONE = ("08", "57P01", "57P02", "57P03")

_HERE_MS = 2  # a reply slower than this is waited for through the event loop
_HERE_ROUNDS = 16  # waits outside the loop in a row, at most


class FastPath:
    """Statements committed alone, on a connection that nothing else uses meanwhile."""

    def __init__(self, conn: Conn, waits: Waits) -> None:
        self._conn = conn
        self._waits = waits
        self._pg = conn.pgconn
        self._fd = self._pg.socket
        self._loop = asyncio.get_running_loop()
        self._dumper = Transformer(conn)
        self._encoding = conn.info.encoding
        # Statements prepared on this connection outlive this object: the connection
        # may go back to the pool and come to another lane later.
        self._names = _prepared.setdefault(self._pg, {})
        self._listening = False
        self._waiter: asyncio.Future[pq.abc.PGresult | None] | None = None
        self._result: pq.abc.PGresult | None = None
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)
        # Readable when any descriptor the loop watches is: then the loop has work.
        loop_fd = _selector_fd(self._loop)
        if loop_fd is not None:
            self._poller.register(loop_fd, select.POLLIN)
        self._rounds_here = 0 if loop_fd is not None else _HERE_ROUNDS  # else never here

    async def count(self, text: str, params: Sequence[Any]) -> int:
        """Execute `text` (psycopg `%s` placeholders) on its own; the rows it touched."""
        result = await self._execute(text, params)
        return int(result.command_tuples or 0) if result is not None else 0

    async def rows(self, text: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Execute `text` (`%s` or `%b` placeholders) on its own; the rows it returns."""
        result = await self._execute(text, params)
        if result is None or not result.ntuples:
            return []
        self._dumper.set_pgresult(result)
        return self._dumper.load_rows(0, result.ntuples, tuple)

    async def _execute(self, text: str, params: Sequence[Any]) -> pq.abc.PGresult | None:
        dumped = self._dumper.dump_sequence(params, [PyFormat.AUTO] * len(params))
        types = tuple(self._dumper.types or ())
        formats = list(self._dumper.formats or ())
        name = self._names.get((text, types))
        if name is None:
            # Unique in the process: a PREPARE whose reply was never read (its writer was
            # cancelled) may exist on the server, and its name must never come back.
            name = f"cairn_fast_{next(_serial)}".encode()
            sql = numbered(text).encode(self._encoding)
            await self._round(lambda: self._pg.send_prepare(name, sql, types))
            self._names[(text, types)] = name
        return await self._round(lambda: self._pg.send_query_prepared(name, dumped, formats))

    def pause(self) -> None:
        """Stop watching the socket (psycopg is about to use the connection)."""
        if self._listening:
            self._loop.remove_reader(self._fd)
            self._listening = False

    async def _round(self, send: Any) -> pq.abc.PGresult | None:
        """Send one command, flush it, and wait for its last result."""
        if self._waiter is not None:
            raise RuntimeError("cairn: FastPath used by two writers at once")
        try:
            send()
            while self._pg.flush():  # the socket's buffer is full: rare for one statement
                await self._writable()
        except psycopg.Error:
            self.pause()
            raise
        self._result = None
        if self._rounds_here < _HERE_ROUNDS and not others_ready(self._loop):
            self._rounds_here += 1
            if self._wait_here():
                return self._checked(self._result)
        self._rounds_here = 0  # this wait lets the loop run
        waiter: asyncio.Future[pq.abc.PGresult | None] = self._loop.create_future()
        self._waiter = waiter
        if not self._listening:
            self._loop.add_reader(self._fd, self._readable)
            self._listening = True
        waiting = self._waits.begin(self._conn)
        try:
            result = await waiter
        finally:
            self._waiter = None
            self._waits.end(waiting)
        return self._checked(result)

    def _checked(self, result: pq.abc.PGresult | None) -> pq.abc.PGresult | None:
        if result is not None and result.status not in _OK:
            error = psycopg.errors.error_from_result(result, encoding=self._encoding)
            if (error.sqlstate or "").startswith(_GONE):
                self.pause()
                raise Disconnected() from error  # the server is going away: retry elsewhere
            raise error
        return result

    def _wait_here(self) -> bool:
        """Wait up to _HERE_MS for the reply without the event loop; True if it is all in."""
        deadline = time.monotonic() + _HERE_MS / 1000
        while True:
            left_ms = (deadline - time.monotonic()) * 1000
            ready = self._poller.poll(left_ms) if left_ms > 0 else []
            if not any(fd == self._fd for fd, _ in ready):
                # Too slow, or the loop has other work: its reader takes over from what
                # has arrived so far.
                return False
            try:
                if self._drain():
                    return True
            except psycopg.Error:
                self.pause()
                raise

    def _drain(self) -> bool:
        """Read what has arrived; True once the command's results are all in."""
        self._pg.consume_input()
        while not self._pg.is_busy():
            result = self._pg.get_result()
            if result is None:
                return True
            if self._result is None or self._result.status in _OK:
                self._result = result  # keep the first error, else the last result
        return False

    def _readable(self) -> None:
        try:
            done = self._drain()
        except psycopg.Error as exc:
            self.pause()  # a closed socket stays readable: stop watching it
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_exception(exc)
            return
        if done and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(self._result)

    async def _writable(self) -> None:
        ready: asyncio.Future[None] = self._loop.create_future()

        def writable() -> None:
            if not ready.done():
                ready.set_result(None)

        self._loop.add_writer(self._fd, writable)
        try:
            await ready
        finally:
            self._loop.remove_writer(self._fd)


def _selector_fd(loop: asyncio.AbstractEventLoop) -> int | None:
    """The descriptor of the stock loop's epoll/kqueue selector; None on other loops."""
    selector = getattr(loop, "_selector", None)
    fileno = getattr(selector, "fileno", None)
    if fileno is None:
        return None
    fd = fileno()
    return fd if isinstance(fd, int) and fd >= 0 else None
