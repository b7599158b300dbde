"""Reads of runs by id issued in the same loop iteration share one query."""

from __future__ import annotations

import asyncio
from typing import Any

from cairn.store import _sql
from cairn.store.postgres.connections import Conn, Db, retrying


class RunReader:
    """Reads of runs by id issued in the same loop iteration share one query.

    Many coroutines waiting on runs (a busy `result()`, a dashboard) then cost one round
    trip per loop iteration instead of one each.
    """

    def __init__(self, db: Db) -> None:
        self._db = db
        self._pending: dict[str, list[asyncio.Future[Any]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, run_id: str) -> asyncio.Future[Any]:
        """The future row of `run_id` (None when there is no such run)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.setdefault(run_id, []).append(future)
        return future

    def _flush(self) -> None:
        batch, self._pending = self._pending, {}
        task = asyncio.create_task(self._read(batch), name="cairn-pg-read")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, batch: dict[str, list[asyncio.Future[Any]]]) -> None:
        async def rows(conn: Conn) -> list[Any]:
            cursor = await conn.execute(_SELECT_RUNS, (list(batch),))
            return await cursor.fetchall()

        try:
            found = {row[0]: row for row in await retrying(self._db, rows)}
        except Exception as exc:
            for futures in batch.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        for run_id, futures in batch.items():
            for future in futures:
                if not future.done():
                    future.set_result(found.get(run_id))


# Written out, not made from _sql.SELECT_RUN by replacing its `run_id = ?`: a change there
# would have left this one-run query silently unchanged. Its rows start with run_id.
_SELECT_RUNS = f"SELECT {_sql.RUN_COLUMNS} FROM runs WHERE run_id = ANY(%s)"
