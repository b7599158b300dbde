"""The heartbeat thread's own PostgreSQL connection (blocking psycopg, one thread).

Heartbeats must go on while the event loop is busy (a step that blocks it, a burst of
work), so they do not share the loop's pool. Every beat is bounded: the server gives up
a statement after 5 s (and ends a beat left open as long), the kernel a dead peer after
10 s (the store's conninfo carries `stalls.DEAD_PEER`), and a beat with no reply after
`BEAT_DEADLINE` has its connection shut down (a hung proxy acknowledges what is sent,
so TCP would wait for ever).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from cairn.store.postgres import connections, dialect
from cairn.store.postgres.stalls import shut_down
from cairn.store.programs import workers
from cairn.store.programs.base import Program
from cairn.store.records import Beat, WorkerRecord

# A beat left open (its process frozen between two statements) holds its worker's row,
# which a claim of that worker's runs waits for (orphans.still_orphaned): the server
# ends such a session, and the claim waits no more, after 5 s.
_OPTIONS: dict[str, Any] = {
    "connect_timeout": 5,
    "options": (
        "-c statement_timeout=5000 -c lock_timeout=5000 -c idle_in_transaction_session_timeout=5000"
    ),
}
BEAT_DEADLINE = 10.0


class PostgresSideChannel:
    """A connection of its own for heartbeats (see Store.side_channel)."""

    def __init__(self, conninfo: str, *, where: str, deadline: float = BEAT_DEADLINE) -> None:
        self._conninfo = conninfo
        self.where = where
        self.deadline = deadline
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._beating: psycopg.Connection[Any] | None = None  # the deadline's connection

    def beat(
        self,
        worker: WorkerRecord,
        let_go: Sequence[tuple[str, int]] = (),
        stopped: Callable[[], bool] | None = None,
    ) -> Beat:
        """Heartbeat `worker` and read what it holds; StoreError if the server fails."""
        timer: threading.Timer | None = None
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                conninfo = psycopg.conninfo.make_conninfo(self._conninfo, **_OPTIONS)
                self._conn = psycopg.connect(conninfo, autocommit=True)
            conn = self._conn
            with self._lock:
                self._beating = conn
            timer = threading.Timer(self.deadline, self._expired, args=(conn,))
            timer.daemon = True
            timer.start()
            with conn.transaction():
                beat = _run(conn, workers.beat_at(worker, let_go, time.time(), stopped))
                if beat.released:  # other workers may take them at once
                    conn.execute(dialect.NOTIFY, (connections.payload([0.0]),))
            return beat
        except (psycopg.Error, UnicodeError) as exc:
            self._stop_deadline(timer)
            self.close()  # a fresh connection next time
            raise connections.store_error(self.where, exc) from exc
        finally:
            self._stop_deadline(timer)

    def _expired(self, conn: psycopg.Connection[Any]) -> None:
        """On the timer's thread: no reply within the deadline, so the beat fails."""
        with self._lock:
            if self._beating is conn:
                shut_down(conn)

    def _stop_deadline(self, timer: threading.Timer | None) -> None:
        if timer is not None:
            timer.cancel()
        with self._lock:
            self._beating = None  # from now on the connection may be closed

    def close(self) -> None:
        """Disconnect."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _run(conn: psycopg.Connection[Any], program: Program[Beat]) -> Beat:
    try:
        statement = next(program)
        while True:
            cursor = None
            pairs = dialect.program_statements(
                statement.text, statement.params, lock=statement.lock
            )
            for text, params in pairs:
                cursor = conn.execute(text, params)
            assert cursor is not None
            answer: Any
            if statement.fetch == "count":
                answer = cursor.rowcount
            elif statement.fetch == "one":
                answer = cursor.fetchone() if cursor.description else None
            else:
                answer = cursor.fetchall() if cursor.description else []
            statement = program.send(answer)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
