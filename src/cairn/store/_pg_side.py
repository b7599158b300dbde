"""The heartbeat thread's own PostgreSQL connection (blocking psycopg, one thread).

Heartbeats must go on while the event loop is busy (a step that blocks it, a burst of
work), so they do not share the loop's pool. Every statement is bounded: a server that
stops answering fails the beat within seconds instead of holding the thread.
"""

from __future__ import annotations

from typing import Any

import psycopg

from cairn.store import _pg_conn, _pg_sql, claim_programs
from cairn.store.programs import Program
from cairn.store.records import Beat, WorkerRecord

_OPTIONS: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 10_000,  # ms: a half-open connection fails instead of hanging
    "options": "-c statement_timeout=5000 -c lock_timeout=5000",
}


class PostgresSideChannel:
    """A connection of its own for heartbeats (see Store.side_channel)."""

    def __init__(self, conninfo: str, *, where: str) -> None:
        self._conninfo = conninfo
        self.where = where
        self._conn: psycopg.Connection[Any] | None = None

    def beat(self, worker: WorkerRecord) -> Beat:
        """Heartbeat `worker` and read what it holds; StoreError if the server fails."""
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                conninfo = psycopg.conninfo.make_conninfo(self._conninfo, **_OPTIONS)
                self._conn = psycopg.connect(conninfo, autocommit=True)
            with self._conn.transaction():
                return _run(self._conn, claim_programs.beat(worker))
        except (psycopg.Error, UnicodeError) as exc:
            self.close()  # a fresh connection next time
            raise _pg_conn.store_error(self.where, exc) from exc

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
            pairs = _pg_sql.program_statements(
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
