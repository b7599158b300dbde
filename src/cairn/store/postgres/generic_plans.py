"""Reads whose best plan does not depend on their values, on connections that plan once.

psycopg prepares a statement executed five times on a connection; PostgreSQL then plans
each execution for its values (a custom plan) until the plan it would cache for any
values (the generic plan) looks no dearer. A runs page filtered by a value a third of a
million runs share always looks cheaper planned for that value, so it was planned again
at every execution: at 1,000,000 runs the statement took 1.15 ms instead of 0.75 ms,
while a small database's page kept its generic plan (0.66 ms). Such reads
(`SqlStore.read_one_plan`) go to a small pool of connections of their own that always
use the generic plan (`plan_cache_mode=force_generic_plan`), so no other statement's
plan changes. The pool opens on the first such read.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from cairn.store._health import StoreHealth
from cairn.store.postgres import connections
from cairn.store.postgres.connections import Db, Pool, Program

T = TypeVar("T")

# Pages are read one at a time by a dashboard or the CLI: two connections suffice.
_CONNECTIONS = 2
_GENERIC = "-c plan_cache_mode=force_generic_plan"


def generic_conninfo(conninfo: str) -> str:
    """`conninfo` with the generic plan always chosen (after the URL's own `options`)."""
    options = str(conninfo_to_dict(conninfo).get("options") or "")
    return make_conninfo(conninfo, options=f"{options} {_GENERIC}".strip())


class GenericPlanReads:
    """Read-only programs on the pool whose connections always use the generic plan."""

    def __init__(self, conninfo: str, where: str, retry_for: float, health: StoreHealth) -> None:
        self._conninfo = generic_conninfo(conninfo)
        self._where = where
        self._retry_for = retry_for
        self._health = health
        self._db: Db | None = None
        self._opening: asyncio.Lock | None = None

    async def read(self, program: Program[T]) -> T:
        """Run a read-only program, each statement on one of these connections."""
        return await connections.read(await self._ready(), program)

    async def _ready(self) -> Db:
        if self._db is not None:
            return self._db
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._db is None:
                pool: Pool = AsyncConnectionPool(
                    self._conninfo,
                    min_size=1,
                    max_size=_CONNECTIONS,
                    kwargs={"autocommit": True},
                    open=False,
                    name="cairn-generic-plans",
                )
                # Connections come as reads ask for them: a server that is away makes
                # the read retry and fail as any other read does, not the opening.
                await pool.open(wait=False)
                self._db = Db(pool, self._where, self._retry_for, self._health)
        return self._db

    async def close(self) -> None:
        """Close the pool, if it was opened."""
        db, self._db = self._db, None
        if db is not None:
            await db.pool.close()
