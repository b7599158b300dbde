"""Opening a PostgreSQL database: connect, apply pending migrations, learn bulk forms.

A server that cannot be reached at all fails at once (a wrong URL should not hang for the
retry window). One that answered and then dropped the connection (a network flapping as a
worker starts) is tried again for up to `retry_for`: the migration is one transaction
under an advisory lock that skips what is applied, so a lost reply to its COMMIT is
harmless to repeat. A database with nothing pending is only read (the applied versions),
without the lock; so is one opened not to be migrated, which is refused if not current.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg

from cairn.errors import StoreError
from cairn.store import migrate
from cairn.store._sql import Statement
from cairn.store.postgres import connections, dialect
from cairn.store.postgres.connections import Conn

log = logging.getLogger("cairn.store.postgres")

# Taken (for the transaction) while migrating, so processes starting together take turns.
MIGRATION_LOCK = 0x636169726E  # "cairn"


async def prepare(
    conninfo: str, where: str, retry_for: float, migrate: bool = True
) -> dict[str, dialect.Bulk]:
    """Migrate on a connection of its own; the server's bulk forms of the hot statements.

    `migrate=False`: only check the schema is there and current (SchemaMissing if not).
    """
    loop = asyncio.get_running_loop()
    deadline: float | None = None  # set once the server has answered
    delay = 0.05
    while True:
        conn: Conn | None = None
        try:
            conn = await psycopg.AsyncConnection.connect(
                conninfo, autocommit=True, connect_timeout=10
            )
            if deadline is None:
                deadline = loop.time() + retry_for
            async with conn:
                await (_migrate if migrate else _require)(conn, where)
                return await _bulk_forms(conn)
        except psycopg.Error as exc:
            lost = connections.is_lost(conn, exc) or connections.is_transient(exc)
            if deadline is None or not lost or loop.time() >= deadline:
                verb = "migrate" if deadline is not None else "open"
                raise StoreError(
                    f"cannot {verb} database {where}: {connections.first_line(exc)}"
                ) from exc
            log.warning(
                "cairn: lost %s while opening it (%s); retrying", where, connections.first_line(exc)
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


async def _migrate(conn: Conn, where: str) -> None:
    if await _up_to_date(conn, where):
        return
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(migrate.TABLE_SQL)
        cursor = await conn.execute("SELECT version FROM cairn_migrations")
        applied = {row[0] for row in await cursor.fetchall()}
        for migration in migrate.pending("postgres", applied, where=where):
            for statement in migrate.statements(migration.sql):
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO cairn_migrations (version, name, applied_at) "
                "VALUES (%s, %s, EXTRACT(EPOCH FROM now()))",
                (migration.version, migration.name),
            )


async def _require(conn: Conn, where: str) -> None:
    """SchemaMissing unless the database has cairn's schema at this version; one read."""
    try:
        cursor = await conn.execute("SELECT version FROM cairn_migrations")
    except psycopg.errors.UndefinedTable:
        applied = None
    else:
        applied = {row[0] for row in await cursor.fetchall()}
    missing = "that database has no cairn schema"
    migrate.require_current("postgres", applied, where=where, missing=missing)


async def _up_to_date(conn: Conn, where: str) -> bool:
    """True if every migration is applied: one read, where migrating is five round trips.

    Applied versions are never taken back, so what this read shows applied stays applied
    and the lock has nothing to wait for. A database without the table (or with pending
    migrations) takes the locked path; one that is newer is refused here as there.
    """
    try:
        cursor = await conn.execute("SELECT version FROM cairn_migrations")
    except psycopg.errors.UndefinedTable:
        return False  # autocommit: the failed read left no transaction behind
    applied = {row[0] for row in await cursor.fetchall()}
    return not migrate.pending("postgres", applied, where=where)


async def _bulk_forms(conn: Conn) -> dict[str, dialect.Bulk]:
    """Bulk forms of the statements that have one, typed as the server types them.

    A bulk form is only faster: a statement without one is written row by row.
    """
    # Each statement is prepared under a name of its own and all are described by one
    # read; nothing is deallocated, since this connection closes next.
    names: dict[str, Statement] = {}
    for index, text in enumerate(dialect.BULK):
        pg = dialect.program_statements(text, (), lock="")[-1][0]
        try:
            await conn.execute(f"PREPARE cairn_describe_{index} AS {dialect.numbered(pg)}")
        except psycopg.Error as exc:
            log.debug("cairn: cannot describe %r: %s", text, exc)
        else:
            names[f"cairn_describe_{index}"] = text
    types: dict[str, list[str]] = {}
    if names:
        cursor = await conn.execute(
            "SELECT name, parameter_types::text[] FROM pg_prepared_statements WHERE name = ANY(%s)",
            (list(names),),
        )
        types = {name: kinds for name, kinds in await cursor.fetchall()}
    forms: dict[str, dialect.Bulk] = {}
    for name, text in names.items():
        form = None if name not in types else dialect.bulk_form(text, types[name])
        if form is not None:
            forms[text] = form
    for text in dialect.BULK:
        if text not in forms:
            log.debug("cairn: no bulk form for %r", text)
    return forms
