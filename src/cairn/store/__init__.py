"""The storage interface and its backends; `open_store(url)` picks one by URL scheme."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import unquote, urlsplit

from cairn.errors import ConfigError
from cairn.store import locations
from cairn.store.locations import redact
from cairn.store.protocol import LeaseLost, Store
from cairn.store.records import RunQuery, RunRecord, StepRecord

__all__ = ["LeaseLost", "RunQuery", "RunRecord", "StepRecord", "Store", "open_store", "opened"]

DEFAULT_URL = "sqlite:///cairn.db"


def sqlite_path(url: str) -> str:
    """The file path of a `sqlite://` URL (three slashes: relative, four: absolute)."""
    if not url.startswith("sqlite:///"):
        raise ConfigError(
            f"invalid SQLite URL {url!r} (use sqlite:///relative.db, sqlite:////abs/path.db "
            "or sqlite:///:memory:)"
        )
    path = unquote(url[len("sqlite:///") :].split("?", 1)[0])
    if not path:
        raise ConfigError(f"invalid SQLite URL {url!r}: no file name")
    return path


def open_store(url: str) -> Store:
    """A store for `url` (not yet opened); ConfigError names an unsupported URL."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "sqlite":
        from cairn.store.sqlite.store import SqliteStore

        return SqliteStore(sqlite_path(url))
    if scheme == "memory":
        from cairn.store.sqlite.store import SqliteStore

        return SqliteStore(locations.memory_path(url), memory=True)
    if scheme == "file":
        from cairn.store.sqlite.directory import DirectoryStore

        return DirectoryStore(locations.file_directory(url))
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        try:
            from cairn.store.postgres import driver

            driver.check()  # one line naming the package too old, before it fails deep down
            from cairn.store.postgres.store import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                f"database URL {redact(url)!r} needs the PostgreSQL extra: "
                "pip install 'cairn-workflows[postgres]'"
            ) from exc
        store: Store = PostgresStore(url)
        return store
    raise ConfigError(
        f"unsupported database URL {redact(url)!r} (use sqlite:///path.db, "
        "file:///directory, memory:// or postgresql://...)"
    )


@asynccontextmanager
async def opened(url: str, *, migrate: bool = True) -> AsyncIterator[Store]:
    """The store for `url`, open for the block and closed after it.

    `migrate=False`: only a database that has cairn's schema at this version opens;
    any other raises `migrate.SchemaMissing` with nothing created or changed.
    """
    store = open_store(url)
    await store.open(migrate=migrate)
    try:
        yield store
    finally:
        await store.close()
