"""An engine on a database that must already exist: what commands that read or steer open.

`Engine.open` applies pending migrations, so an engine pointed at a mistyped URL makes a
new SQLite file, or cairn's tables in someone else's PostgreSQL database. `engine_on`
opens the store itself first, with `migrate=False` when the caller only reads or steers
runs: such a database must have cairn's schema at this version, else the store raises
`store.migrate.SchemaMissing` and nothing is created or changed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from cairn.runtime.engine import Engine
from cairn.store import open_store


@asynccontextmanager
async def engine_on(url: str, *, migrate: bool, **settings: Any) -> AsyncIterator[Engine]:
    """An open `Engine(url, **settings)`; its store opened with `migrate` first.

    The engine is built before the database opens, so a bad setting (a key, a limit) is
    named first, as with `Engine` alone.
    """
    store = open_store(url)
    engine = Engine(url, store=store, **settings)
    try:
        await store.open(migrate=migrate)
        async with engine:
            yield engine
    finally:
        await store.close()  # a store passed in is its owner's to close
