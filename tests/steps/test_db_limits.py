"""db.query/db.update time limits, enforced by each database, and a cancel reaching them.

A statement waits for a row lock another connection holds (SQLite: the write lock), or
runs long on its own; the step's `timeout` must fail the attempt in about that time.
Times are asserted generously, never as benchmarks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy

import cairn
from cairn.steps import db
from engine.kit import WAIT, Kit

LONG = {
    "sqlite": "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
    "SELECT count(*) AS n FROM c",
    "postgresql": "SELECT pg_sleep(60) AS n",
    "mysql": "SELECT SLEEP(60) AS n",
}


def _engine(url: str) -> sqlalchemy.Engine:
    """A connection of the test's own, beside the step library's pool."""
    for plain, driver in (
        ("postgresql://", "postgresql+psycopg://"),
        ("mysql://", "mysql+pymysql://"),
    ):
        if url.startswith(plain):
            url = driver + url[len(plain) :]
    return sqlalchemy.create_engine(url, poolclass=sqlalchemy.NullPool)


@contextlib.contextmanager
def row_locked(url: str) -> Iterator[None]:
    """Table `t` with row 1, which another connection holds locked until the block ends."""
    engine = _engine(url)
    with engine.begin() as setup:
        setup.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER)")
        setup.exec_driver_sql("INSERT INTO t (id, n) VALUES (1, 0)")
    with engine.connect() as holder:
        if url.startswith("sqlite"):
            holder.exec_driver_sql("BEGIN IMMEDIATE")  # SQLite: the write lock
        else:
            holder.begin()
            holder.exec_driver_sql("SELECT n FROM t WHERE id = 1 FOR UPDATE")
        try:
            yield
        finally:
            holder.rollback()
    engine.dispose()


async def _failed_in(kit: Kit, app_url: str, call: Any) -> tuple[str, float]:
    """Run `call()` as the workflow's one step (one attempt); its error and the time taken."""

    @kit.workflow("db.limited")
    async def flow() -> str:
        try:
            await call()
        except cairn.StepFailed as failed:
            return failed.error_message
        return "done"

    loop = asyncio.get_running_loop()
    async with kit.engine(databases={"app": app_url}) as engine:
        started = loop.time()
        run = await engine.start(flow)
        message = await run.result(timeout=WAIT * 3)
        return message, loop.time() - started


async def test_db_limits__an_update_waiting_for_a_lock_fails_at_its_timeout(
    sqlite_kit: Kit, app_url: str
) -> None:
    with row_locked(app_url):
        message, took = await _failed_in(
            sqlite_kit,
            app_url,
            lambda: db.update("app", "UPDATE t SET n = 1 WHERE id = 1", timeout="1s", retries=1),
        )
    assert "ran past its timeout (1s)" in message
    assert took < 4.0  # about 1 s (the driver's own waits were 5 s, 50 s or for ever)


async def test_db_limits__a_long_query_fails_at_its_timeout(sqlite_kit: Kit, app_url: str) -> None:
    sql = LONG[sqlalchemy.make_url(app_url).get_backend_name()]
    message, took = await _failed_in(
        sqlite_kit, app_url, lambda: db.query("app", sql, timeout="1s", retries=1)
    )
    assert "ran past its timeout (1s)" in message
    assert took < 4.0


async def test_db_limits__the_limit_is_put_back_for_the_next_statement(
    sqlite_kit: Kit, app_url: str
) -> None:
    # The pooled connection goes on to a step with a longer limit: it must not keep 1 s.
    backend = sqlalchemy.make_url(app_url).get_backend_name()
    if backend == "sqlite":
        pytest.skip("nothing of SQLite's limit outlives the statement that a test can see")
    pause = "SELECT pg_sleep(1.5) AS n" if backend == "postgresql" else "SELECT SLEEP(1.5) AS n"

    @sqlite_kit.workflow("db.limit.reset")
    async def flow() -> int:
        await db.query("app", "SELECT 1 AS n", timeout="1s")
        return len(await db.query("app", pause, timeout="10s"))

    async with sqlite_kit.engine(databases={"app": app_url}) as engine:
        run = await engine.start(flow)
        assert await run.result(timeout=WAIT) == 1


@pytest.fixture(params=["postgres", "mariadb"])
def server_app(request: pytest.FixtureRequest) -> str:
    """A database on a server, whose statements another connection can cancel."""
    return str(request.getfixturevalue(f"{request.param}_app"))


async def test_db_limits__a_cancel_reaches_a_statement_waiting_for_a_lock(
    sqlite_kit: Kit, server_app: str
) -> None:
    postgres_app = server_app
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    @sqlite_kit.workflow("db.cancelled")
    async def flow() -> int:
        loop.call_soon(entered.set)
        return int(await db.update("app", "UPDATE t SET n = 1 WHERE id = 1", timeout="1h"))

    with row_locked(postgres_app):
        async with sqlite_kit.engine(databases={"app": postgres_app}) as engine:
            run = await engine.start(flow)
            await asyncio.wait_for(entered.wait(), WAIT)
            await asyncio.sleep(0.5)  # the update waits for the lock by now
            asked = loop.time()
            await run.cancel()
            with pytest.raises(cairn.RunCancelled):
                await run.result(timeout=WAIT)
            took = loop.time() - asked
            attempts = await engine.control.attempts(run.run_id)
    assert took < 3.0  # not the hour of its timeout
    # Ended by the cancel (one attempt recorded as cancelled), not failed and retried.
    assert [attempt["outcome"] for attempt in attempts] == ["cancelled"]


@pytest.mark.parametrize("timeout", [0, "soon", None])
def test_db_limits__a_bad_timeout_fails_at_the_call(timeout: Any) -> None:
    with pytest.raises(ValueError, match=r"db\.query"):
        db.query("app", "SELECT 1", timeout=timeout)
