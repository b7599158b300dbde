"""`cairn db upgrade`: apply pending schema migrations and say which schema the database has."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from cairn.cli import options, output
from cairn.store import migrate, open_store


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register `cairn db upgrade`."""
    db = commands.add_parser(
        "db", parents=[common], help="database schema", description="Manage the schema."
    )
    actions = db.add_subparsers(dest="action", metavar="ACTION", required=True)
    upgrade = actions.add_parser(
        "upgrade",
        parents=[common],
        help="apply pending migrations",
        description="Apply pending schema migrations (engines also do this at start-up) "
        "and print the schema versions the database now has. A database migrated by a "
        "newer cairn is refused.",
    )
    upgrade.set_defaults(handler=upgrade_db)


def upgrade_db(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn db upgrade`."""
    store = open_store(glob.url)

    async def apply() -> None:
        await store.open()  # applies pending migrations; SchemaTooNew for a newer schema
        await store.close()

    asyncio.run(apply())
    shipped = migrate.available(store.dialect)
    newest = max((m.version for m in shipped), default=0)
    applied = ", ".join(f"{m.version:04d}_{m.name}" for m in shipped) or "none"
    print(
        f"database {output.database(glob.url)} ({store.dialect}) is at schema version {newest}; "
        f"migrations applied: {applied}",
        flush=True,
    )
    return 0
