"""A SQLite file's schema: apply cairn's pending migrations, or check that none is pending."""

from __future__ import annotations

import os
import sqlite3
from urllib.parse import quote

from cairn.errors import StoreError
from cairn.store import migrate
from cairn.store.sqlite.connections import read_only_hint


def check_file(path: str, *, migrate: bool) -> None:
    """StoreError if the folder of `path` is missing; with `migrate` False, SchemaMissing.

    SchemaMissing: the file is not there or has not cairn's schema at this version.
    Neither check creates or changes anything.
    """
    if not migrate:
        require_schema(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise StoreError(f"cannot open database {path!r}: no folder {folder!r}")


def require_schema(path: str) -> None:
    """SchemaMissing unless file `path` has cairn's schema at this version; it changes nothing.

    The file is opened with SQLite's `mode=rw`, which never creates one.
    """
    where = repr(path)
    if not os.path.exists(path):
        raise migrate.SchemaMissing(where, "the file does not exist")
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True)
        try:
            conn.execute("PRAGMA busy_timeout=30000")
            rows = conn.execute("SELECT version FROM cairn_migrations").fetchall()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise StoreError(f"cannot open database {where}: {exc}{read_only_hint(path)}") from exc
        rows = None
    except sqlite3.Error as exc:  # "file is not a database"
        raise StoreError(f"cannot open database {where}: {exc}") from exc
    applied = None if rows is None else {row[0] for row in rows}
    migrate.require_current("sqlite", applied, where=where, missing="the file has no cairn schema")


def apply_migrations(conn: sqlite3.Connection, where: str) -> None:
    """Apply the migrations `conn`'s database lacks, in one transaction."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(migrate.TABLE_SQL)
        applied = {row[0] for row in conn.execute("SELECT version FROM cairn_migrations")}
        for migration in migrate.pending("sqlite", applied, where=where):
            for statement in migrate.statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO cairn_migrations (version, name, applied_at) "
                "VALUES (?, ?, julianday('now'))",
                (migration.version, migration.name),
            )
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"cannot migrate database {where}: {exc}") from exc
        raise
