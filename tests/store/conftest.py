"""Fixtures of the store contract suite: every test runs on SQLite and on PostgreSQL.

And on the two other spellings of the SQLite store, memory:// and file:///dir, which
open it through other doors (a process-wide in-memory database, a directory).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cairn.store import Store, open_store

from .kit import OpenStore


@pytest.fixture(params=["sqlite", "postgres", "memory", "file"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on every store URL: sqlite:///, postgresql://, memory://, file:///."""
    if request.param == "memory":
        return "memory://"
    if request.param == "file":
        return f"file://{tmp_path / 'store'}"
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def open_store_at(store_url: str) -> AsyncIterator[OpenStore]:
    """Open further stores on the test's database (other processes, in effect)."""
    opened: list[Store] = []

    async def factory() -> Store:
        store = open_store(store_url)
        await store.open()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()


@pytest.fixture
async def store(open_store_at: OpenStore) -> Store:
    """An open store on a fresh database."""
    return await open_store_at()
