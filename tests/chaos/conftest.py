"""Fixtures of the chaos suite: workers on each store, and a private PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.chaos.harness import Chaos
from tests.chaos.pg_cluster import PgCluster, private_cluster


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
