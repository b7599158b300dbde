"""`cairn db`: the schema, and the keys of values encrypted at rest.

`upgrade` applies pending schema migrations and says which schema the database has;
`rekey` rewrites encrypted values under the current key; `keygen` prints a new key.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from cairn import blobs, codecs
from cairn.cli import options, output
from cairn.errors import ConfigError
from cairn.runtime import rekeying
from cairn.store import migrate, open_store, opened


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
    rekey = actions.add_parser(
        "rekey",
        parents=[common],
        help="rewrite encrypted values under the current key",
        description="Rewrite every stored value encrypted under an older key under the "
        "current one (CAIRN_KEYS or CAIRN_KEYS_FILE, and CAIRN_CURRENT_KEY), in batches of "
        "one transaction each: safe to stop and run again. Needs every key still in use.",
    )
    rekey.add_argument(
        "--batch", type=int, default=rekeying.BATCH, help="values per transaction (500)"
    )
    rekey.set_defaults(handler=rekey_db)
    keygen = actions.add_parser(
        "keygen",
        parents=[common],
        help="print a new random encryption key",
        description="Print a new random 32-byte key, base64, for CAIRN_KEYS (ID:KEY).",
    )
    keygen.set_defaults(handler=keygen_db)


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


def rekey_db(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn db rekey`."""
    codec = codecs.from_env()
    if codec is None:
        raise ConfigError(
            "cairn db rekey needs the keys: set CAIRN_KEYS or CAIRN_KEYS_FILE "
            "(see docs/howto/encryption.md)"
        )
    if ns.batch < 1:
        raise ConfigError(f"--batch must be a positive number, got {ns.batch}")

    async def run() -> dict[str, int]:
        async with opened(glob.url, migrate=False) as store:  # rewrites, never creates
            found = blobs.configured(store)  # offloaded values are rewritten too
            return await rekeying.rekey(store, codec, batch=ns.batch, blobs=found)

    done = asyncio.run(run())
    where = ", ".join(f"{name} {count}" for name, count in done.items()) or "none"
    print(f"rewrote {sum(done.values())} values under key {codec.current!r} ({where})", flush=True)
    return 0


def keygen_db(ns: argparse.Namespace, glob: options.Globals) -> int:
    """Run `cairn db keygen`."""
    print(codecs.new_key(), flush=True)
    return 0
