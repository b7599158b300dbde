"""Fixtures of the store contract suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cairn.store import Store, open_store

from .kit import OpenStore


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
