"""Shared fixtures: `store_url` runs a test on SQLite and on PostgreSQL.

PostgreSQL tests use a fresh database per test, copied from a template migrated once per
session. Locally they skip (with the reason) when PostgreSQL is unreachable; with CI=true
they fail instead, so an outage can never pass as green.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tests.pg_databases import Databases

import cairn

PG_URL = os.environ.get("CAIRN_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() == "true"
# One template per test session: sessions run side by side (several engineers, xdist).
TEMPLATE = f"cairn_test_template_{uuid.uuid4().hex[:8]}"

# pytest-xdist's workers (make test) start with COLUMNS=80 and LINES=24 in their
# environment, and the CLI folds its tables to COLUMNS when it is set (piped, it prints
# them 200 wide). The CLI subprocesses the tests start inherit it: drop it, so a worker
# runs them as a serial session does. A test that wants a width sets it itself.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


def _pg_problem() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'cairn-workflows[postgres]')"
    try:
        import cairn.store.postgres.store  # noqa: F401
    except ImportError as exc:
        return f"PostgresStore is unavailable: {exc}"
    try:
        with psycopg.connect(PG_URL, connect_timeout=3):
            pass
    except psycopg.Error as exc:
        return f"PostgreSQL at {PG_URL} is unreachable: {exc}".splitlines()[0]
    return None


_PG_PROBLEM: str | bool | None = False  # False: not checked yet


def pg_problem() -> str | None:
    global _PG_PROBLEM
    if _PG_PROBLEM is False:
        _PG_PROBLEM = _pg_problem()
    return _PG_PROBLEM  # type: ignore[return-value]


def require_postgres() -> None:
    """Skip (locally) or fail (CI=true) when PostgreSQL cannot be used."""
    problem = pg_problem()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"CI=true but PostgreSQL tests cannot run: {problem}", pytrace=False)
    pytest.skip(problem)


def _admin_url(database: str) -> str:
    base = PG_URL.rsplit("/", 1)[0]
    return f"{base}/{database}"


def migrated(url: str) -> None:
    """Create cairn's schema at `url`, as a worker's start does: the commands that only
    read or steer refuse a database without it (tests/process/test_cli_no_database.py)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from cairn.store import opened

    async def create() -> None:
        async with opened(url):
            pass

    with ThreadPoolExecutor(1) as thread:  # also from an async test, whose loop runs
        thread.submit(asyncio.run, create()).result()


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """A database migrated once, copied for each test."""
    require_postgres()
    import asyncio

    import psycopg

    from cairn.store.postgres.store import PostgresStore

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {TEMPLATE}")

    async def migrate() -> None:
        store = PostgresStore(_admin_url(TEMPLATE))
        await store.open()
        await store.close()

    asyncio.run(migrate())
    yield TEMPLATE
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")


@pytest.fixture(scope="session")
def pg_databases(pg_template: str) -> Iterator[Databases]:
    """Copies of the template, each made while the test before it runs."""
    databases = Databases(PG_URL, pg_template)
    yield databases
    databases.close()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test."""
    require_postgres()
    databases: Databases = request.getfixturevalue("pg_databases")
    name = databases.take()
    yield _admin_url(name)
    databases.give_back(name)


@pytest.fixture(params=["sqlite", "postgres"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database that no store has opened yet (so not migrated), on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    require_postgres()
    import psycopg

    name = f"cairn_test_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield _admin_url(name)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh SQLite database file for one test."""
    return f"sqlite:///{tmp_path / 'cairn.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The same test on both stores."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[cairn.Engine]:
    """A running engine on a fresh database of each store."""
    async with cairn.Engine(store_url, workers=16, poll_interval=0.05) as eng:
        yield eng
