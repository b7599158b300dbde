"""Fixtures of the dashboard tests: a real `cairn dashboard` process on each store.

The server never executes runs; an in-test engine with workers (`workers` fixture)
executes the ones it starts, from workflows declared in `flows.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from tests.conftest import PG_URL, require_postgres

import cairn

from .flows import Flows
from .server import Server, start_server


@pytest.fixture
def server_factory(store_url: str, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start dashboard processes on the test's database: `server_factory(token=...)`."""
    started: list[Server] = []

    def factory(*extra: str, env: dict[str, str] | None = None) -> Server:
        server = start_server(store_url, tmp_path, *extra, env=env)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


@pytest.fixture
def server(server_factory) -> Server:
    """A dashboard without a token on 127.0.0.1."""
    return server_factory()


@pytest.fixture
async def api(server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the server's /api/v1."""
    async with httpx.AsyncClient(base_url=server.api, timeout=10) as client:
        yield client


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def unchanging_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One dashboard per module and store, for requests it must refuse (an empty database).

    A process start is most of such a test's time. The tests sharing it send requests
    that must change nothing; those that could start something check that nothing was.
    """
    cwd = tmp_path_factory.mktemp("dashboard")
    if request.param == "sqlite":
        server = start_server(f"sqlite:///{cwd / 'cairn.db'}", cwd)
        yield server
        server.stop()
        return
    require_postgres()
    databases = request.getfixturevalue("pg_databases")
    name = databases.take()
    server = start_server(f"{PG_URL.rsplit('/', 1)[0]}/{name}", cwd)
    yield server
    server.stop()
    databases.give_back(name)


@pytest.fixture
async def unchanging_api(unchanging_server: Server) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on the shared `unchanging_server`'s /api/v1."""
    async with httpx.AsyncClient(base_url=unchanging_server.api, timeout=10) as client:
        yield client


@pytest.fixture
def flows(store_url: str) -> Flows:
    """The test workflows, in a registry of their own."""
    return Flows(store_url)


@pytest.fixture
async def workers(flows: Flows) -> AsyncIterator[cairn.Engine]:
    """An engine that executes the runs the dashboard starts."""
    async with flows.engine() as engine:
        yield engine
