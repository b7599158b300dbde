"""Fixtures of the chaos suite: workers on each store, and a private PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.harness import Chaos
from tests.chaos.pg_cluster import PgCluster, private_cluster
from tests.chaos.proxy import FreezingProxy


@pytest.fixture
def chaos(tmp_path: Path, store_url: str) -> Iterator[Chaos]:
    scene = Chaos(tmp_path, store_url)
    try:
        yield scene
    finally:
        scene.stop_all()


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    server = private_cluster()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def freezing(pg_url: str) -> Iterator[FreezingProxy]:
    """A FreezingProxy in front of the shared PostgreSQL, thawed and closed afterwards."""
    proxy = FreezingProxy(("127.0.0.1", 5432))
    try:
        yield proxy
    finally:
        proxy.thaw()
        proxy.close()
